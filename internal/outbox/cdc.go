package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// CDC is the PostgreSQL change-data-capture relay: it reads the outbox
// table's inserts from a logical replication slot (pgoutput, protocol 1:
// each transaction arrives whole, after its commit, in commit order),
// publishes them, and only after the broker's ack confirms the slot up to
// the end of the last published transaction. A crash before the confirm
// makes the server send those transactions again. The relay never writes
// to the table: the application may delete the row in the transaction
// that inserts it (the WAL keeps the event).
type CDC struct {
	cfg     Config
	db      *sql.DB // the ordinary connection: setup and the slot-lag query
	pub     Publisher
	log     *slog.Logger
	metrics *Metrics
	// afterPublish, when set (tests), runs after the broker's ack and
	// before the confirm; an error from it ends the session there, as a
	// crash would.
	afterPublish func([]Event) error
}

// errStandby: the slot is streaming to another relay; this one waits.
var errStandby = errors.New("outbox: cdc: the slot is in use by another relay")

// NewCDC returns the CDC relay of cfg (mode cdc, driver postgres) over db.
func NewCDC(cfg Config, db *sql.DB, pub Publisher, log *slog.Logger) (*CDC, error) {
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	if cfg.Mode != "cdc" {
		return nil, fmt.Errorf("outbox: NewCDC is the cdc relay, config has mode %q", cfg.Mode)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := newMetrics(cfg.Table, destination(cfg))
	m.slotLag.Store(0)
	return &CDC{cfg: cfg, db: db, pub: pub, log: log, metrics: m}, nil
}

// Metrics returns the relay's counters and gauges.
func (c *CDC) Metrics() *Metrics { return c.metrics }

// Setup creates the publication (inserts into the table only) and the
// slot if either is missing. A new slot starts at the server's current
// position: rows committed before it are not in its stream (docs/outbox.md).
func (c *CDC) Setup(ctx context.Context) error {
	var n int
	if err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = $1`, c.cfg.Publication).Scan(&n); err != nil {
		return fmt.Errorf("outbox: cdc: %w", err)
	}
	if n == 0 {
		// Names are checked identifiers (Config.Normalize): safe in SQL text.
		if _, err := c.db.ExecContext(ctx, "CREATE PUBLICATION "+c.cfg.Publication+" FOR TABLE "+c.cfg.Table+" WITH (publish = 'insert')"); err != nil {
			return fmt.Errorf("outbox: cdc: create publication: %w", err)
		}
	}
	if err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, c.cfg.Slot).Scan(&n); err != nil {
		return fmt.Errorf("outbox: cdc: %w", err)
	}
	if n == 0 {
		if _, err := c.db.ExecContext(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, c.cfg.Slot); err != nil {
			return fmt.Errorf("outbox: cdc: create slot: %w", err)
		}
		c.log.Info("outbox: created replication slot", "slot", c.cfg.Slot)
		// Rows committed before the slot are not in its stream: say so
		// loudly when there are any (docs/outbox.md, "CDC mode").
		var unsent int64
		if err := c.db.QueryRowContext(ctx, "SELECT count(*) FROM "+c.cfg.Table+" WHERE sent_at IS NULL").Scan(&unsent); err == nil && unsent > 0 {
			c.log.Warn("outbox: the table held unsent rows when the slot was created; those committed before it are not streamed: relay them once with mode: polling",
				"table", c.cfg.Table, "rows", unsent)
		}
	}
	return nil
}

// Run relays until ctx ends, then returns nil. A failed session (database
// or broker down, the slot busy with another relay) is logged, counted,
// and started again from the slot's confirmed position after a backoff.
func (c *CDC) Run(ctx context.Context) error {
	c.log.Info("outbox relay started", "table", c.cfg.Table, "destination", destination(c.cfg), "mode", "cdc", "slot", c.cfg.Slot)
	lagCtx, stopLag := context.WithCancel(ctx)
	var lag sync.WaitGroup
	lag.Go(func() { c.watchLag(lagCtx) })
	defer lag.Wait()
	defer stopLag()
	failures := 0
	for ctx.Err() == nil {
		err := c.Setup(ctx)
		if err == nil {
			err = c.session(ctx)
		}
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, errStandby) {
			// Another relay streams from the slot: the backlog is its to
			// report (and the slot lag, which every relay reports).
			c.metrics.setBacklog(0, 0)
			failures = 0
			c.log.Debug("outbox cdc: standby, the slot is in use", "slot", c.cfg.Slot)
			sleep(ctx, time.Second)
			continue
		}
		failures++
		c.metrics.errors.Add(1)
		c.log.Warn("outbox cdc session failed", "err", err, "failures", failures)
		sleep(ctx, backoff(failures))
	}
	c.log.Info("outbox relay stopped")
	return nil
}

// watchLag queries the slot's lag behind the server's WAL once a second.
func (c *CDC) watchLag(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var lag sql.NullInt64
		err := c.db.QueryRowContext(ctx, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, c.cfg.Slot).Scan(&lag)
		if err == nil && lag.Valid {
			c.metrics.slotLag.Store(max(lag.Int64, 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// session is one replication connection: start streaming from the slot's
// confirmed position and relay until an error or ctx ends.
func (c *CDC) session(ctx context.Context) error {
	pc, err := pgconn.ParseConfig(c.cfg.DSN)
	if err != nil {
		return fmt.Errorf("outbox: cdc: dsn: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	pc.RuntimeParams["bytea_output"] = "hex" // how decodeRow reads payload
	// The slot's own position: every status the relay sends is at or
	// after it, so the slot never moves back.
	var start pglogrepl.LSN
	if err := c.db.QueryRowContext(ctx, `SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, c.cfg.Slot).Scan(&start); err != nil {
		return fmt.Errorf("outbox: cdc: slot %s: %w", c.cfg.Slot, err)
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("outbox: cdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// LSN 0: the server starts at the slot's confirmed_flush_lsn.
	if err := pglogrepl.StartReplication(ctx, conn, c.cfg.Slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + c.cfg.Publication + "'"},
	}); err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "55006" { // object_in_use
			return errStandby
		}
		return fmt.Errorf("outbox: cdc: start replication on slot %s: %w", c.cfg.Slot, err)
	}
	s := &stream{c: c, conn: conn, rels: map[uint32]*relation{}, confirmed: start, pendingTo: start}
	return s.run(ctx)
}

// stream is the state of one session: the relation layouts the server
// announced, the transaction being received, and the committed events not
// yet published.
type stream struct {
	c    *CDC
	conn *pgconn.PgConn
	rels map[uint32]*relation

	inTx      bool
	txEvents  []Event
	pending   []Event   // committed, not yet acked by the broker
	oldest    time.Time // commit time of pending[0]'s transaction
	pendingTo pglogrepl.LSN
	confirmed pglogrepl.LSN // sent to the server as flushed
	lastSent  time.Time
}

// statusEvery is how often the relay reports its position unasked; well
// inside the server's wal_sender_timeout (60 s by default).
const statusEvery = 10 * time.Second

func (s *stream) run(ctx context.Context) error {
	for {
		if time.Since(s.lastSent) >= statusEvery {
			if err := s.confirm(ctx, s.confirmed); err != nil {
				return err
			}
		}
		// With events waiting, a quiet moment flushes them; otherwise wait
		// up to the status interval.
		wait := statusEvery
		if len(s.pending) > 0 {
			wait = time.Millisecond
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		raw, err := s.conn.ReceiveMessage(rctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pgconn.Timeout(err) {
			if err := s.flush(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("outbox: cdc: receive: %w", err)
		}
		if err := s.handle(ctx, raw); err != nil {
			return err
		}
		if len(s.pending) >= s.c.cfg.Batch {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
	}
}

func (s *stream) handle(ctx context.Context, raw pgproto3.BackendMessage) error {
	switch m := raw.(type) {
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("outbox: cdc: server: %s (%s)", m.Message, m.Code)
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return nil
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return fmt.Errorf("outbox: cdc: %w", err)
			}
			// Nothing received is unpublished: the slot may move to the
			// server's sent position, past WAL of other tables, so an idle
			// outbox does not pin WAL on disk.
			to := s.confirmed
			if !s.inTx && len(s.pending) == 0 && k.ServerWALEnd > to {
				to = k.ServerWALEnd
			}
			if k.ReplyRequested || to > s.confirmed {
				return s.confirm(ctx, to)
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return fmt.Errorf("outbox: cdc: %w", err)
			}
			return s.logical(x.WALData)
		}
	}
	return nil
}

// logical handles one pgoutput message. pglogrepl's decoders index into
// the message without checking every length; a malformed message from the
// server is turned into an error (the session restarts) rather than a
// crash of the relay (FuzzCDCMessages).
func (s *stream) logical(data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("outbox: cdc: malformed pgoutput message (%d bytes): %v", len(data), p)
		}
	}()
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case 'R', 'B', 'C':
	case 'I':
		if err := checkInsert(data); err != nil {
			return err
		}
	default:
		return nil // updates, deletes, types, origins: nothing the relay reads
	}
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("outbox: cdc: decode: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		s.rels[m.RelationID] = newRelation(m)
	case *pglogrepl.BeginMessage:
		s.inTx, s.txEvents = true, s.txEvents[:0]
	case *pglogrepl.InsertMessage:
		r, ok := s.rels[m.RelationID]
		if !ok {
			return fmt.Errorf("outbox: cdc: insert into relation %d before its description", m.RelationID)
		}
		if r.name != s.c.cfg.Table {
			return nil // another table of the publication
		}
		ev, err := r.decode(m.Tuple)
		if err != nil {
			return err
		}
		s.txEvents = append(s.txEvents, ev)
	case *pglogrepl.CommitMessage:
		s.inTx = false
		if len(s.txEvents) > 0 {
			if len(s.pending) == 0 {
				s.oldest = m.CommitTime
			}
			s.pending = append(s.pending, s.txEvents...)
			s.txEvents = s.txEvents[:0]
		}
		// Even a transaction without outbox rows moves the position.
		s.pendingTo = pglogrepl.LSN(m.TransactionEndLSN)
		if len(s.pending) == 0 {
			s.confirmed = max(s.confirmed, s.pendingTo)
		}
		s.c.metrics.setBacklog(int64(len(s.pending)), s.age())
	}
	return nil
}

func (s *stream) age() float64 {
	if len(s.pending) == 0 {
		return 0
	}
	return max(time.Since(s.oldest).Seconds(), 0)
}

// flush publishes the committed events and, after the broker's ack,
// confirms the slot to the end of their last transaction.
func (s *stream) flush(ctx context.Context) error {
	if len(s.pending) == 0 {
		return nil
	}
	evs := s.pending
	if err := s.c.pub.Publish(ctx, evs); err != nil {
		return fmt.Errorf("outbox: cdc: publish %d events: %w", len(evs), err)
	}
	if s.c.afterPublish != nil {
		if err := s.c.afterPublish(evs); err != nil {
			return err
		}
	}
	s.c.metrics.published.Add(int64(len(evs)))
	s.pending = nil
	s.c.metrics.claims.Add(1)
	s.c.metrics.setBacklog(0, 0)
	return s.confirm(ctx, s.pendingTo)
}

// confirm tells the server everything up to lsn is done with (written,
// flushed and applied: the broker has it).
func (s *stream) confirm(ctx context.Context, lsn pglogrepl.LSN) error {
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: lsn}); err != nil {
		return fmt.Errorf("outbox: cdc: confirm %s: %w", lsn, err)
	}
	s.confirmed, s.lastSent = max(s.confirmed, lsn), time.Now()
	return nil
}
