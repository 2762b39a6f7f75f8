package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The first catalog layout: one file, catalog.json (from session 3 also
// catalog.bak.json, {"checksum", "catalog"}), rewritten whole on every
// change. Open moves it into the directories (catalog.go) and removes it.
const (
	legacyCatalogFile       = "catalog.json"
	legacyCatalogBackupFile = "catalog.bak.json"
)

// legacyCatalog is catalog.json's content.
type legacyCatalog struct {
	Queues        map[string]QueueSettings        `json:"queues"`
	Topics        map[string]TopicSettings        `json:"topics"`
	Subscriptions map[string]SubscriptionSettings `json:"subscriptions,omitempty"`
	NextID        uint64                          `json:"next_id"`
}

// migrateLegacy writes every entity of a catalog.json into its directory,
// then the next id, then removes the old files. A crash part way leaves
// catalog.json, and the next Open does it all again (each write is whole).
func (c *catalog) migrateLegacy() error {
	d, found, err := readLegacyCatalog(c.fs, filepath.Join(c.root, legacyCatalogFile))
	if err != nil || !found {
		bd, bfound, berr := readLegacyCatalog(c.fs, filepath.Join(c.root, legacyCatalogBackupFile))
		switch {
		case berr == nil && bfound:
			d, found, err = bd, true, nil
		case err != nil:
			return fmt.Errorf("catalog: %w; its copy: %v (restore the data directory from a backup)", err, errors.Join(berr, notFound(bfound)))
		}
	}
	if !found {
		return nil
	}
	for _, s := range d.Queues {
		if err := c.putIn(queueDir(c.root, s), s); err != nil {
			return err
		}
	}
	for _, s := range d.Topics {
		if err := c.putIn(topicDir(c.root, s), s); err != nil {
			return err
		}
	}
	for _, s := range d.Subscriptions {
		ts, ok := d.Topics[s.Topic]
		if !ok {
			continue
		}
		dir := filepath.Join(topicDir(c.root, ts), "subs", fmt.Sprintf("%d-%s", s.ID, s.Name))
		if err := c.putIn(dir, s); err != nil {
			return err
		}
	}
	c.next = max(c.next, d.NextID)
	next := struct {
		Next uint64 `json:"next_id"`
	}{c.next}
	if err := writeSettings(c.fs, c.root, idsFile, next); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	for _, n := range []string{legacyCatalogFile, legacyCatalogBackupFile} {
		if err := c.fs.Remove(filepath.Join(c.root, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	c.log.Info("catalog moved into the queues' and topics' directories", "queues", len(d.Queues), "topics", len(d.Topics))
	return c.fs.SyncDir(c.root)
}

// putIn writes settings into dir, making it if a crash had left it missing.
func (c *catalog) putIn(dir string, v any) error {
	if err := vfs.MkdirAllDurable(c.fs, dir); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return c.put(dir, v)
}

func notFound(found bool) error {
	if found {
		return nil
	}
	return fs.ErrNotExist
}

// readLegacyCatalog reads one copy of the first layout; found is false when
// it does not exist.
func readLegacyCatalog(fsys vfs.FS, path string) (d legacyCatalog, found bool, err error) {
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
