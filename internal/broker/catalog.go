package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
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

// The catalog is kept twice, catalog.json and catalog.bak.json, each
//
//	{"checksum": <CRC-32C of the catalog value's bytes>, "catalog": {…}}
//
// so one damaged byte in either is caught and the other copy used. A file
// without a checksum (the first format) is read as it is.
const (
	catalogFile       = "catalog.json"
	catalogBackupFile = "catalog.bak.json"
)

func openCatalog(fsys vfs.FS, dir string, log *slog.Logger) (*catalog, error) {
	c := &catalog{fs: fsys, dir: dir, path: filepath.Join(dir, catalogFile)}
	c.data = catalogData{Version: 1, Queues: map[string]QueueSettings{}, Topics: map[string]TopicSettings{}, NextID: 1}
	data, found, err := readCatalog(fsys, c.path)
	if err != nil {
		backup := filepath.Join(dir, catalogBackupFile)
		bdata, bfound, berr := readCatalog(fsys, backup)
		if berr != nil || !bfound {
			return nil, fmt.Errorf("catalog: %w; its copy %s: %v (restore the data directory from a backup)", err, backup, errors.Join(berr, notFound(bfound)))
		}
		log.Error("catalog damaged; its copy was used and is written back", "err", err, "copy", backup)
		data, found = bdata, true
		c.data = data
		if err := c.write(data); err != nil {
			return nil, err
		}
	}
	if found {
		c.data = data
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

func notFound(found bool) error {
	if found {
		return nil
	}
	return fs.ErrNotExist
}

// readCatalog reads one copy; found is false when it does not exist.
func readCatalog(fsys vfs.FS, path string) (d catalogData, found bool, err error) {
	buf, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, false, nil
	}
	if err != nil {
		return d, false, err
	}
	var framed struct {
		Checksum *uint32         `json:"checksum"`
		Catalog  json.RawMessage `json:"catalog"`
	}
	if err := json.Unmarshal(buf, &framed); err != nil {
		return d, true, fmt.Errorf("%s is damaged: %w", path, err)
	}
	body := buf
	if framed.Catalog != nil { // else the first, unchecksummed format
		if framed.Checksum == nil || crc32.Checksum(framed.Catalog, crc32c) != *framed.Checksum {
			return d, true, fmt.Errorf("%s is damaged: checksum mismatch", path)
		}
		body = framed.Catalog
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, true, fmt.Errorf("%s is damaged: %w", path, err)
	}
	return d, true, nil
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// write makes d durable in both copies, the main one first: a crash between
// the two leaves the main one new and the copy one change behind.
func (c *catalog) write(d catalogData) error {
	body, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	buf := fmt.Appendf(nil, "{\"checksum\": %d, \"catalog\": %s}\n", crc32.Checksum(body, crc32c), body)
	for _, name := range []string{catalogFile, catalogBackupFile} {
		if err := vfs.WriteFileAtomic(c.fs, c.dir, name, buf); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	return nil
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
	if err := c.write(next); err != nil {
		return err
	}
	c.data = next
	return nil
}
