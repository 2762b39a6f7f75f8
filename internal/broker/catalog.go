package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The catalog is what the broker remembers about what exists: every queue,
// topic and subscription with its settings. Each one's settings live in its
// own directory, so a create, an update or a delete writes one small file
// whatever the count (100,000 queues cost nothing more per create than 10):
//
//	queues/<id>-<name>/settings.json                   QueueSettings
//	topics/<id>-<name>/settings.json                   TopicSettings
//	topics/<id>-<name>/subs/<id>-<name>/settings.json  SubscriptionSettings
//	ids.json                                           the next id to hand out
//
// Each file is written crash-atomically and kept twice (<name>.bak.json
// beside it), as {"checksum": <CRC-32C of the value's bytes>, "value": …},
// so one damaged byte in either copy costs nothing. A directory without
// settings is a create that never finished or a delete that did not: Open
// removes it. Ids are never reused (ids.json is written before a directory
// is made), so a name created again never reads an old one's files.
type catalog struct {
	fs   vfs.FS
	root string
	log  *slog.Logger

	mu       sync.Mutex // guards next and reserved, and serialises writes of ids.json
	next     uint64     // the next id to hand out
	reserved uint64     // ids.json's value: ids below it may have been handed out
}

// catalogData is what Open finds: everything that exists, by name.
type catalogData struct {
	Queues map[string]QueueSettings
	Topics map[string]TopicSettings
	// Subscriptions of topics, keyed "<topic>/<name>" (subscription.go).
	Subscriptions map[string]SubscriptionSettings
	// Unavailable are the queues whose settings are damaged in both copies.
	Unavailable map[string]unavailableQueue
}

// unavailableQueue is a queue that exists but cannot be served: its
// directory, and why.
type unavailableQueue struct {
	dir string
	err error
}

const (
	settingsFile = "settings.json"
	idsFile      = "ids.json"
)

// openCatalog reads what exists under root, after moving a catalog.json of
// the first layout into the directories.
func openCatalog(fsys vfs.FS, root string, log *slog.Logger) (*catalog, catalogData, error) {
	c := &catalog{fs: fsys, root: root, log: log, next: 1}
	if err := c.migrateLegacy(); err != nil {
		return nil, catalogData{}, err
	}
	var ids struct {
		Next uint64 `json:"next_id"`
	}
	if found, err := readSettings(fsys, root, idsFile, &ids); err != nil {
		log.Error("catalog: ids.json is damaged in both copies; the next id is taken from the directories", "err", err)
	} else if found {
		c.next = max(c.next, ids.Next)
	}
	d := catalogData{Queues: map[string]QueueSettings{}, Topics: map[string]TopicSettings{},
		Subscriptions: map[string]SubscriptionSettings{}, Unavailable: map[string]unavailableQueue{}}
	err := c.scan(filepath.Join(root, "queues"), func(dir, name string, id uint64) error {
		var s QueueSettings
		err := c.readOwn(dir, &s, id, name, &s.ID, &s.Name)
		switch {
		case errors.Is(err, errIncomplete):
			return err
		case err != nil:
			d.Unavailable[name] = unavailableQueue{dir, err}
		default:
			d.Queues[name] = s
		}
		return nil
	})
	if err != nil {
		return nil, d, err
	}
	err = c.scan(filepath.Join(root, "topics"), func(dir, name string, id uint64) error {
		var s TopicSettings
		if err := c.readOwn(dir, &s, id, name, &s.ID, &s.Name); err != nil {
			if !errors.Is(err, errIncomplete) {
				log.Error("topic unavailable: its settings are damaged in both copies; its data is left as it is", "dir", dir, "err", err)
				return nil
			}
			return err
		}
		d.Topics[name] = s
		return c.scan(filepath.Join(dir, "subs"), func(sdir, sname string, sid uint64) error {
			var ss SubscriptionSettings
			if err := c.readOwn(sdir, &ss, sid, sname, &ss.ID, &ss.Name); err != nil {
				if !errors.Is(err, errIncomplete) {
					log.Error("subscription unavailable: its settings are damaged in both copies", "dir", sdir, "err", err)
					return nil
				}
				return err
			}
			d.Subscriptions[subKey(name, sname)] = ss
			return nil
		})
	})
	return c, d, err
}

// errIncomplete: a directory without settings (see catalog).
var errIncomplete = errors.New("no settings: a create or a delete that did not finish")

// scan calls fn for each "<id>-<name>" directory of dir (none if dir does
// not exist); fn returning errIncomplete has the directory removed.
func (c *catalog) scan(dir string, fn func(dir, name string, id uint64) error) error {
	names, err := c.fs.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	for _, n := range names {
		ids, name, ok := strings.Cut(n, "-")
		id, err := strconv.ParseUint(ids, 10, 64)
		if !ok || err != nil || name == "" {
			continue // not one of ours (a temporary file, say)
		}
		c.next = max(c.next, id+1)
		p := filepath.Join(dir, n)
		switch err := fn(p, name, id); {
		case errors.Is(err, errIncomplete):
			c.log.Warn("catalog: removing a directory without settings (a create or delete a crash interrupted)", "dir", p)
			if err := vfs.RemoveAll(c.fs, p); err != nil {
				return fmt.Errorf("catalog: %w", err)
			}
		case err != nil:
			return err
		}
	}
	return nil
}

// readOwn reads dir's settings into v, checking they are the directory's
// (its id and name); a mismatch is damage.
func (c *catalog) readOwn(dir string, v any, id uint64, name string, gotID *uint64, gotName *string) error {
	found, err := readSettings(c.fs, dir, settingsFile, v)
	switch {
	case err != nil:
		return err
	case !found:
		return errIncomplete
	case *gotID != id || *gotName != name:
		return fmt.Errorf("%s: settings of %d-%s in the directory of %d-%s", dir, *gotID, *gotName, id, name)
	}
	return nil
}

// idReserve is how many ids ids.json reserves at a time: most creates
// write nothing to it, and a crash skips the rest of a block, never reuses
// it.
const idReserve = 1000

// allocID hands out the next id; ids.json holds one past every id that can
// have been handed out.
func (c *catalog) allocID() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next >= c.reserved {
		reserve := struct {
			Next uint64 `json:"next_id"`
		}{c.next + idReserve}
		if err := writeSettings(c.fs, c.root, idsFile, reserve); err != nil {
			return 0, fmt.Errorf("catalog: %w", err)
		}
		c.reserved = reserve.Next
	}
	id := c.next
	c.next++
	return id, nil
}

// put writes an entity's settings into its directory, which must exist.
func (c *catalog) put(dir string, v any) error {
	if err := writeSettings(c.fs, dir, settingsFile, v); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

// drop removes an entity's settings, durably: from then on its directory
// is garbage, removed now by the caller or at the next Open.
func (c *catalog) drop(dir string) error {
	for _, name := range []string{settingsFile, backupName(settingsFile)} {
		if err := c.fs.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	if err := c.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

func backupName(name string) string { return strings.TrimSuffix(name, ".json") + ".bak.json" }

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// writeSettings writes v to dir/name and to its copy, each crash-atomically,
// the main one first: a crash between the two leaves the main one new and
// the copy one change behind.
func writeSettings(fsys vfs.FS, dir, name string, v any) error {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	buf := fmt.Appendf(nil, "{\"checksum\": %d, \"value\": %s}\n", crc32.Checksum(body, crc32c), body)
	for _, n := range []string{name, backupName(name)} {
		if err := vfs.WriteFileAtomic(fsys, dir, n, buf); err != nil {
			return err
		}
	}
	return nil
}

// readSettings reads dir/name into v, or its copy if the main one is
// damaged; found is false when neither exists.
func readSettings(fsys vfs.FS, dir, name string, v any) (found bool, err error) {
	var errs []error
	for _, n := range []string{name, backupName(name)} {
		ok, err := readFramed(fsys, filepath.Join(dir, n), v)
		if err == nil && ok {
			return true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return false, nil
	}
	return true, errors.Join(errs...)
}

// readFramed reads one checksummed copy.
func readFramed(fsys vfs.FS, path string, v any) (found bool, err error) {
	buf, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var framed struct {
		Checksum *uint32         `json:"checksum"`
		Value    json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(buf, &framed); err != nil || framed.Checksum == nil || framed.Value == nil {
		return true, fmt.Errorf("%s is damaged: %v", path, errors.Join(err, errors.New("not a checksummed settings file")))
	}
	if crc32.Checksum(framed.Value, crc32c) != *framed.Checksum {
		return true, fmt.Errorf("%s is damaged: checksum mismatch", path)
	}
	if err := json.Unmarshal(framed.Value, v); err != nil {
		return true, fmt.Errorf("%s is damaged: %w", path, err)
	}
	return true, nil
}
