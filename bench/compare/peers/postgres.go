package peers

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// pgIdlePoll is how long a consumer that found no job sleeps before it
// looks again (bounded by the receive's wait). Polling is how a SKIP
// LOCKED queue is usually read; it is what W3's latency pays on an idle
// queue.
const pgIdlePoll = time.Millisecond

// postgresDriver uses a jobs table. Every INSERT autocommits (a batch is
// one multi-row INSERT, one commit), so with synchronous_commit=on the
// reply comes after the WAL flush. A consumer claims jobs in a transaction
// with SELECT … FOR UPDATE SKIP LOCKED, and acks them by deleting each by
// id and committing; a consumer that dies releases its claims.
type postgresDriver struct {
	pool *pgxpool.Pool
}

func openPostgres(ctx context.Context, o Options) (*postgresDriver, error) {
	cfg, err := pgxpool.ParseConfig("postgres://postgres@" + o.Addr + "/postgres?sslmode=disable")
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(o.InFlight + o.Consumers + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return &postgresDriver{pool: pool}, nil
}

func (d *postgresDriver) Close() error { d.pool.Close(); return nil }

func (d *postgresDriver) Prepare(ctx context.Context, name string, _ load.Kind) error {
	t := pgx.Identifier{name}.Sanitize()
	_, err := d.pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %s; CREATE TABLE %s (id bigserial PRIMARY KEY, body bytea NOT NULL)`, t, t))
	return err
}

func (d *postgresDriver) Producer(_ context.Context, name string, _ load.Kind, _ int) (load.Producer, error) {
	t := pgx.Identifier{name}.Sanitize()
	return &pgProducer{pool: d.pool,
		one:  fmt.Sprintf(`INSERT INTO %s (body) VALUES ($1)`, t),
		many: fmt.Sprintf(`INSERT INTO %s (body) SELECT unnest($1::bytea[])`, t)}, nil
}

type pgProducer struct {
	pool      *pgxpool.Pool
	one, many string
}

func (p *pgProducer) Close() error { return nil }

func (p *pgProducer) Send(ctx context.Context, bodies [][]byte) error {
	var err error
	if len(bodies) == 1 {
		_, err = p.pool.Exec(ctx, p.one, bodies[0])
	} else {
		_, err = p.pool.Exec(ctx, p.many, bodies)
	}
	return err
}

func (d *postgresDriver) Consumer(_ context.Context, name string, _ load.Kind, _ int) (load.Consumer, error) {
	t := pgx.Identifier{name}.Sanitize()
	return &pgConsumer{pool: d.pool,
		claim: fmt.Sprintf(`SELECT id, body FROM %s ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, t),
		del:   fmt.Sprintf(`DELETE FROM %s WHERE id = ANY($1)`, t)}, nil
}

// pgConsumer holds the open claiming transaction between Receive and Ack.
type pgConsumer struct {
	pool       *pgxpool.Pool
	claim, del string
	tx         pgx.Tx
}

func (c *pgConsumer) Close() error {
	if c.tx != nil {
		c.tx.Rollback(context.Background())
	}
	return nil
}

func (c *pgConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	deadline := time.Now().Add(wait)
	for {
		msgs, err := c.tryClaim(ctx, limit)
		if err != nil || len(msgs) > 0 || !time.Now().Before(deadline) {
			return msgs, err
		}
		select {
		case <-time.After(min(pgIdlePoll, time.Until(deadline))):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *pgConsumer) tryClaim(ctx context.Context, limit int) ([]load.Msg, error) {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, c.claim, limit)
	if err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	var out []load.Msg
	for rows.Next() {
		var id int64
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			rows.Close()
			tx.Rollback(ctx)
			return nil, err
		}
		out = append(out, load.Msg{Body: body, Handle: id})
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(out) == 0 {
		tx.Rollback(ctx)
		return nil, err
	}
	c.tx = tx
	return out, nil
}

// Ack deletes every claimed job by its id and commits: the commit is the
// durable ack.
func (c *pgConsumer) Ack(ctx context.Context, msgs []load.Msg) error {
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.Handle.(int64)
	}
	tx := c.tx
	c.tx = nil
	if _, err := tx.Exec(ctx, c.del, ids); err != nil {
		tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}
