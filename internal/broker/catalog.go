package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// catalogData is everything the broker must remember about what exists:
// queues, topics and their settings. It is small and rarely written, so it is
// kept whole in memory and rewritten whole on each change.
type catalogData struct {
	Version int                      `json:"version"`
	Queues  map[string]QueueSettings `json:"queues"`
	Topics  map[string]TopicSettings `json:"topics"`
	// Subscriptions of topics, keyed "<topic>/<name>" (subscription.go).
	Subscriptions map[string]SubscriptionSettings `json:"subscriptions,omitempty"`
	// NextQueueID numbers queue directories, so a queue deleted and created
	// again under the same name never reads the old one's files.
	NextID uint64 `json:"next_id"`
}

// catalog persists catalogData crash-atomically: a change is written to a
// temporary file, synced, renamed over the old file and the directory synced.
// After a crash the file holds either the old or the new catalog, never a mix.
type catalog struct {
	fs   vfs.FS
	dir  string
	path string

	mu   sync.Mutex // guards data and serialises writers of the file
	data catalogData
}

const catalogFile = "catalog.json"

func openCatalog(fsys vfs.FS, dir string) (*catalog, error) {
	c := &catalog{fs: fsys, dir: dir, path: filepath.Join(dir, catalogFile)}
	c.data = catalogData{Version: 1, Queues: map[string]QueueSettings{}, Topics: map[string]TopicSettings{}, NextID: 1}
	buf, err := vfs.ReadFile(fsys, c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := json.Unmarshal(buf, &c.data); err != nil {
		return nil, fmt.Errorf("catalog %s is corrupt: %w", c.path, err)
	}
	if c.data.Queues == nil {
		c.data.Queues = map[string]QueueSettings{}
	}
	if c.data.Topics == nil {
		c.data.Topics = map[string]TopicSettings{}
	}
	if c.data.Subscriptions == nil {
		c.data.Subscriptions = map[string]SubscriptionSettings{}
	}
	return c, nil
}

// snapshot returns a deep enough copy of the catalog to read without the lock.
func (c *catalog) snapshot() catalogData {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data.clone()
}

func (d catalogData) clone() catalogData {
	out := d
	out.Queues = make(map[string]QueueSettings, len(d.Queues))
	for k, v := range d.Queues {
		out.Queues[k] = v.clone()
	}
	out.Topics = make(map[string]TopicSettings, len(d.Topics))
	for k, v := range d.Topics {
		out.Topics[k] = v
	}
	out.Subscriptions = make(map[string]SubscriptionSettings, len(d.Subscriptions))
	for k, v := range d.Subscriptions {
		out.Subscriptions[k] = v
	}
	return out
}

// update applies fn to a copy of the catalog and makes the result durable
// before it becomes visible. If fn or the write fails, nothing changes.
func (c *catalog) update(fn func(*catalogData) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.data.clone()
	if err := fn(&next); err != nil {
		return err
	}
	buf, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if err := vfs.WriteFileAtomic(c.fs, c.dir, catalogFile, buf); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	c.data = next
	return nil
}
