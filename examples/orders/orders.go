// Package orders is a small order service that uses Switchyard through
// its public Go API only (github.com/switchyard/switchyard):
//
//   - PlaceOrder writes an order and, in the same transaction, enqueues
//     its order.placed event to the warehouse: both commit or neither does;
//   - Payments is the HTTP handler that Switchyard delivers payment events
//     to: a payment provider posts them to Switchyard's inbox, whose
//     forward source records each event once and enqueues it to this
//     service, in order per order. The handler verifies the delivery's
//     signature and applies each delivery once (Receive keyed by its
//     webhook-id, which every redelivery repeats).
//
// setup.sql (psql) creates the service's tables and the Switchyard
// configuration it needs; place_order.sql does what PlaceOrder does, from
// SQL, as a service in any other language would, and setup.sql's
// payments-sql source applies payments with a SQL function instead of Go.
package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard"
)

// Service is the order service.
type Service struct {
	Pool *pgxpool.Pool
	// PaymentsSecret verifies the deliveries of the orders-payments
	// destination ("whsec_..."): the same secret that destination's
	// secret_ref names in Switchyard's environment.
	PaymentsSecret string
	Logger         *slog.Logger
}

// Order is what order.placed carries.
type Order struct {
	ID         int64  `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int64  `json:"total_cents"`
}

// PlaceOrder stores an order and enqueues order.placed for the warehouse
// in the same transaction.
func (s *Service) PlaceOrder(ctx context.Context, customer string, totalCents int64) (Order, error) {
	o := Order{Customer: customer, TotalCents: totalCents}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO orders.orders (customer, total_cents) VALUES ($1, $2) RETURNING id`,
			customer, totalCents).Scan(&o.ID)
		if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		payload, err := json.Marshal(o)
		if err != nil {
			return err
		}
		_, err = switchyard.Enqueue(ctx, tx, switchyard.Message{
			Topic: "order.placed", Destination: "warehouse",
			AggregateType: "order", AggregateID: strconv.FormatInt(o.ID, 10),
			Payload: payload,
		})
		return err
	})
	return o, err
}

// payment is what the payment provider's events carry.
type payment struct {
	Type    string `json:"type"`
	OrderID int64  `json:"order_id"`
	Amount  int64  `json:"amount_cents"`
}

// Payments receives the payment events Switchyard forwards: it verifies
// the signature over the raw body, then applies the event once per
// delivery id. 2xx tells Switchyard the message is delivered; any other
// answer makes it retry.
func (s *Service) Payments() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, switchyard.MaxPayloadBytes))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if err := switchyard.VerifyWebhook(s.PaymentsSecret, r.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		ev := switchyard.Event{Source: "switchyard-payments", ID: r.Header.Get("webhook-id"), Payload: body}
		res, err := switchyard.Receive(r.Context(), s.Pool, ev, s.applyPayment)
		if err != nil {
			s.Logger.Error("payment not applied", slog.String("id", ev.ID), slog.Any("error", err))
			status := http.StatusInternalServerError
			if errors.Is(err, switchyard.ErrTransient) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, "not applied", status)
			return
		}
		s.Logger.Info("payment event", slog.String("id", ev.ID), slog.String("outcome", string(res.Outcome)))
		w.WriteHeader(http.StatusNoContent)
	})
}

// applyPayment marks the order paid, in the transaction that records the
// delivery.
func (s *Service) applyPayment(ctx context.Context, tx pgx.Tx, ev switchyard.Event) error {
	var p payment
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return fmt.Errorf("payment event: %w", err)
	}
	if p.Type != "payment.succeeded" {
		return nil // nothing to do for the others
	}
	tag, err := tx.Exec(ctx, `UPDATE orders.orders SET paid_cents = paid_cents + $2 WHERE id = $1`, p.OrderID, p.Amount)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("payment for unknown order %d", p.OrderID)
	}
	return nil
}
