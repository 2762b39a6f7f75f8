// Command outbox is the checkout → outbox → relay → queue → email worker
// example of docs/outbox.md, on PostgreSQL. Two roles:
//
//	outbox -dsn postgres://… setup               # the tables: orders, outbox, sent_emails
//	outbox -dsn postgres://… -n 5 checkout        # place 5 orders, each with its event (flags before the role)
//	outbox -dsn postgres://… -server URL worker   # send the emails, once per event
//
// Between them runs the relay, `sluice outbox relay --config relay.yaml`
// (README.md beside this file has the whole walk-through). The worker's
// inbox table is sent_emails: an email is "sent" (printed) and its event id
// recorded in one transaction, so a redelivery, or an event the relay
// published twice, sends nothing.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
)

func main() {
	dsn := flag.String("dsn", "postgres://postgres@127.0.0.1:5432/shop?sslmode=disable", "the shop's PostgreSQL")
	server := flag.String("server", "http://127.0.0.1:8080", "the sluice broker")
	queue := flag.String("queue", "emails", "the queue the relay fills")
	n := flag.Int("n", 3, "checkout: orders to place")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := sql.Open("pgx", *dsn)
	if err == nil {
		defer db.Close()
		err = run(ctx, flag.Arg(0), db, client.New(*server), *queue, *n, os.Stdout)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "outbox example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, role string, db *sql.DB, c *client.Client, queue string, n int, out io.Writer) error {
	switch role {
	case "setup":
		return Setup(ctx, db)
	case "checkout":
		for range n {
			id, err := Checkout(ctx, db, "shopper@example.com", 4200)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "order %d placed\n", id)
		}
		return nil
	case "worker":
		return Worker(ctx, db, c, queue, out)
	}
	return fmt.Errorf("want a role: setup, checkout or worker; got %q", role)
}

// Setup creates the shop's tables: orders, the outbox the relay reads, and
// the worker's inbox.
func Setup(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email TEXT NOT NULL, cents INT NOT NULL)`); err != nil {
		return err
	}
	// The table `sluice outbox schema --driver postgres` prints.
	for _, stmt := range []string{`CREATE TABLE IF NOT EXISTS outbox (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id   TEXT NOT NULL UNIQUE,
  msg_key    TEXT,
  payload    BYTEA NOT NULL,
  headers    JSONB,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  sent_at    TIMESTAMPTZ
)`, `CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (id) WHERE sent_at IS NULL`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	in, err := inbox.New(db, inbox.Postgres, inbox.Table("sent_emails"))
	if err != nil {
		return err
	}
	return in.Migrate(ctx)
}

// OrderPlaced is the event, the outbox row's payload.
type OrderPlaced struct {
	OrderID int64  `json:"order_id"`
	Email   string `json:"email"`
	Cents   int    `json:"cents"`
}

// Checkout inserts the order and its event in one transaction: both commit,
// or neither. It never talks to the broker, so a broker outage never fails
// an order.
func Checkout(ctx context.Context, db *sql.DB, email string, cents int) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO orders (email, cents) VALUES ($1, $2) RETURNING id`, email, cents).Scan(&id); err != nil {
		return 0, err
	}
	payload, _ := json.Marshal(OrderPlaced{OrderID: id, Email: email, Cents: cents})
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, msg_key, payload, headers) VALUES ($1, $2, $3, $4)`,
		fmt.Sprintf("order-%d-placed", id), fmt.Sprint(id), payload, `{"type":"order.placed"}`); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}

// Worker sends one confirmation email per order.placed event until ctx
// ends. The send and the inbox row commit together; the worker acks after
// the commit. The one window left is a crash after the provider accepted
// the email and before the commit: pass the event id as the provider's
// idempotency key where it has one.
func Worker(ctx context.Context, db *sql.DB, c *client.Client, queue string, out io.Writer) error {
	in, err := inbox.New(db, inbox.Postgres, inbox.Table("sent_emails"))
	if err != nil {
		return err
	}
	w := c.NewWorker(queue, in.Handler(func(ctx context.Context, tx *sql.Tx, m *client.Message) error {
		var ev OrderPlaced
		if err := json.Unmarshal(m.GetBody(), &ev); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "email to %s: order %d confirmed, %d.%02d EUR (event %s)\n",
			ev.Email, ev.OrderID, ev.Cents/100, ev.Cents%100, inbox.EventID(m))
		return err
	}))
	return w.Run(ctx)
}
