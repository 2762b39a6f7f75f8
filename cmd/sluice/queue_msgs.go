package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func queueReceiveCmd(f *clientFlags) *cobra.Command {
	var max int
	var wait, vis time.Duration
	var ack, quiet bool
	cmd := &cobra.Command{
		Use:   "receive QUEUE",
		Short: "Receive messages (they stay hidden for the visibility timeout until acked)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.Flags().IntVarP(&max, "max", "n", 1, fmt.Sprintf("receive up to this many (1 to %d)", maxReceiveBatch))
	cmd.Flags().DurationVar(&wait, "wait", 0, fmt.Sprintf("long-poll: wait up to this long for a first message (at most %v)", maxReceiveWait))
	cmd.Flags().DurationVar(&vis, "visibility-timeout", 0, "hide the deliveries this long instead of the queue's timeout")
	cmd.Flags().BoolVar(&ack, "ack", false, "ack each message right after receiving it")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, `print only the receipts, one per line (pipe them to "sluice queue ack")`)
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		fl := cmd.Flags()
		if err := firstErr(
			intRange("max", max, 1, maxReceiveBatch),
			durRange("wait", wait, 0, maxReceiveWait),
			changed(fl, "visibility-timeout", func() error { return durRange("visibility-timeout", vis, 0, maxVisibility) }),
		); err != nil {
			return err
		}
		opts := []client.ReceiveOption{client.MaxMessages(max), client.Wait(wait)}
		if fl.Changed("visibility-timeout") {
			opts = append(opts, client.Visibility(vis))
		}
		msgs, err := c.Receive(ctx, args[0], opts...)
		if err != nil {
			return err
		}
		if ack && len(msgs) > 0 {
			receipts := make([]string, len(msgs))
			for i, m := range msgs {
				receipts[i] = m.GetReceipt()
			}
			if err := ackAll(ctx, c, args[0], receipts); err != nil {
				return err
			}
		}
		return printMessages(cmd, f, msgs, quiet)
	})
	return withFields(cmd, "max_messages=max")
}

func printMessages(cmd *cobra.Command, f *clientFlags, msgs []*client.Message, quiet bool) error {
	w := cmd.OutOrStdout()
	switch {
	case quiet:
		for _, m := range msgs {
			fmt.Fprintln(w, m.GetReceipt())
		}
		return nil
	case f.json():
		return printJSON(w, &sluicev1.ReceiveResponse{Messages: msgs})
	}
	rows := make([][]string, len(msgs))
	for i, m := range msgs {
		rows[i] = messageRow(m)
	}
	return table(w, messageHeader, rows)
}

// The body is the last column: it may be a megabyte, and only the last
// cell of a row is not padded to its column's width.
var messageHeader = []string{"MESSAGE ID", "RECEIVES", "RECEIPT", "BODY"}

func messageRow(m *client.Message) []string {
	return []string{m.GetId(), strconv.Itoa(int(m.GetReceiveCount())), m.GetReceipt(), printable(m.GetBody())}
}

// streamedWidths are the columns' widths when rows are printed as they come (consume),
// where table cannot measure them first: a message id (a UUID), a count, a receipt.
var streamedWidths = []int{36, 8, 27}

// streamedLine is one row of messageHeader's columns padded to streamedWidths (a longer
// cell pushes the rest of its row right; the body, last, is never padded).
func streamedLine(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		if i < len(streamedWidths) {
			fmt.Fprintf(&b, "%-*s  ", streamedWidths[i], c)
			continue
		}
		b.WriteString(c)
	}
	return b.String()
}

func queueConsumeCmd(f *clientFlags) *cobra.Command {
	var max, prefetch int
	var vis time.Duration
	var ack, quiet bool
	cmd := &cobra.Command{
		Use:   "consume QUEUE",
		Short: "Stream deliveries as they arrive, until Ctrl-C or -n messages",
		Long: `Stream a queue's deliveries as they become visible, one line per message
(with -o json, one JSON document per line), until Ctrl-C or -n messages.
Without --ack the deliveries stay in flight: ack, nack or extend them by
receipt, or they are delivered again when their visibility ends.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().IntVarP(&max, "max", "n", 0, "stop after this many messages (0: until Ctrl-C)")
	cmd.Flags().IntVar(&prefetch, "prefetch", 10, "unacked deliveries the stream may hold at once")
	cmd.Flags().DurationVar(&vis, "visibility-timeout", 0, "hide the deliveries this long instead of the queue's timeout")
	cmd.Flags().BoolVar(&ack, "ack", false, "ack each message as it is printed")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the receipts, one per line")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		fl := cmd.Flags()
		if err := firstErr(
			intRange("max", max, 0, 1<<31-1),
			intRange("prefetch", prefetch, 1, 1<<31-1),
			changed(fl, "visibility-timeout", func() error { return durRange("visibility-timeout", vis, 0, maxVisibility) }),
		); err != nil {
			return err
		}
		opts := []client.ReceiveOption{client.MaxMessages(prefetch)}
		if fl.Changed("visibility-timeout") {
			opts = append(opts, client.Visibility(vis))
		}
		w, n := cmd.OutOrStdout(), 0
		if !quiet && !f.json() {
			fmt.Fprintln(w, streamedLine(messageHeader))
		}
		for m, err := range c.Consume(ctx, args[0], opts...) {
			if err != nil {
				return err
			}
			if err := printStreamed(w, f, m, quiet); err != nil {
				return err
			}
			if ack {
				if err := c.Ack(ctx, args[0], m.GetReceipt()); err != nil {
					return err
				}
			}
			if n++; max > 0 && n >= max {
				break
			}
		}
		return nil // Ctrl-C ends a follow; that is not a failure
	})
	return withFields(cmd, "max_in_flight=prefetch")
}

// printStreamed prints one delivery of a stream as its own line.
func printStreamed(w io.Writer, f *clientFlags, m *client.Message, quiet bool) error {
	switch {
	case quiet:
		_, err := fmt.Fprintln(w, m.GetReceipt())
		return err
	case f.json():
		return printJSON(w, m)
	}
	_, err := fmt.Fprintln(w, streamedLine(messageRow(m)))
	return err
}

func queueAckCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ack QUEUE [RECEIPT...]",
		Short: "Ack (delete) received messages by receipt: arguments, or else lines of stdin",
		Args:  cobra.MinimumNArgs(1),
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
		receipts, err := receiptArgs(cmd, args[1:])
		if err != nil {
			return err
		}
		err = ackAll(ctx, c, args[0], receipts)
		var refused *ackRefused
		if err != nil && !errors.As(err, &refused) {
			return err
		}
		acked := len(receipts)
		if refused != nil {
			acked = refused.acked
		}
		if f.json() {
			if perr := printJSONObject(cmd.OutOrStdout(), "acked", acked); perr != nil {
				return perr
			}
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "acked %d\n", acked)
		}
		return err
	})
	return cmd
}

// receiptArgs returns the receipts of the arguments, or else of stdin.
func receiptArgs(cmd *cobra.Command, args []string) ([]string, error) {
	receipts, _, err := lines(args, cmd.InOrStdin())
	if err == nil && len(receipts) == 0 {
		err = errors.New("no receipts: give them as arguments or lines on stdin (sluice queue receive -q prints them)")
	}
	return receipts, err
}

// ackRefused is an ack of several receipts where some were refused: each
// receipt of AckBatch succeeds or fails on its own, so the others are
// acked all the same.
type ackRefused struct {
	acked, refused int
	first          error // the first refusal, with its receipt
}

func (e *ackRefused) Error() string {
	switch {
	case e.acked == 0 && e.refused == 1:
		return e.first.Error()
	case e.acked == 0:
		return fmt.Sprintf("all %d receipts refused; the first: %v", e.refused, e.first)
	}
	return fmt.Sprintf("%d of %d receipts refused, the others acked; the first: %v", e.refused, e.acked+e.refused, e.first)
}

func (e *ackRefused) Unwrap() error { return e.first }

// ackAll acks receipts in batches, going on past a refused receipt.
func ackAll(ctx context.Context, c *client.Client, queue string, receipts []string) error {
	res := &ackRefused{}
	for start := 0; start < len(receipts); start += maxAckBatch {
		chunk := receipts[start:min(start+maxAckBatch, len(receipts))]
		errs, err := c.AckBatch(ctx, queue, chunk)
		if err != nil {
			if res.acked > 0 {
				return fmt.Errorf("after %d acked: %w", res.acked, err)
			}
			return err
		}
		for i, e := range errs {
			if e == nil {
				res.acked++
				continue
			}
			if res.refused++; res.first == nil {
				res.first = fmt.Errorf("receipt %d (%s): %w", start+i+1, chunk[i], e)
			}
		}
	}
	if res.refused > 0 {
		return res
	}
	return nil
}
