// Package customer is the demo inbox handler "customer-upsert": it
// creates a customer from an inbound event if none with that external id
// exists, and updates it otherwise, in switchyard_demo.customers (the
// demo's own schema: internal/demo/demodb, which must be installed).
//
// "Create if absent" is a check-then-insert race: two events about a new
// customer, applied at once (two events of one customer, two console
// instances), both find no row and both insert. customers.external_id
// is deliberately not unique, so Upsert serialises the race the way a
// schema without such a constraint must: an advisory lock on the external
// id (internal/advisory) before the check.
//
// The event payload is
//
//	{"customer": {"id": "cus_123", "name": "Ada", "email": "ada@example.com"}, "version": 3}
//
// where "version" is optional; when present, it orders the customer's
// events (the inbox's out-of-order resolution, entity "customer/<id>").
package customer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/advisory"
	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Name is the handler's name in the inbox registry.
const Name = "customer-upsert"

// lockNamespace is the advisory key namespace of customers' external ids.
const lockNamespace = "demo_customers.external_id"

// Config configures the handler.
type Config struct {
	// Destination, when set, receives a "customer.created" or
	// "customer.updated" outbox message in the same transaction. It must
	// name a row of switchyard.destinations.
	Destination string
	// LockTimeout bounds the wait for the customer's lock;
	// 0: advisory.DefaultTimeout.
	LockTimeout time.Duration
}

// Customer is what an event says about a customer.
type Customer struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

type payload struct {
	Customer Customer `json:"customer"`
	Version  int64    `json:"version"`
}

func parse(body []byte) (payload, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return p, fmt.Errorf("customer event: %w", err)
	}
	if p.Customer.ID == "" {
		return p, errors.New("customer event: no customer.id")
	}
	return p, nil
}

// Registration returns the inbox registration of the handler. Without a
// Destination, an event without a version is received in one statement
// (Registration.Once: CustomerEventOnce); the announcement a Destination
// asks for goes through outbox.Enqueue, in Handle's transaction.
func Registration(cfg Config) inbox.Registration {
	reg := inbox.Registration{
		Handle: func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
			p, err := parse(ev.Payload)
			if err != nil {
				return err
			}
			created, err := Upsert(ctx, tx, p.Customer, cfg.LockTimeout)
			if err != nil || cfg.Destination == "" {
				return err
			}
			return announce(ctx, tx, cfg.Destination, p.Customer, created)
		},
		Entity: func(body []byte) (string, int64, error) {
			p, err := parse(body)
			if err != nil || p.Version == 0 {
				return "", 0, err
			}
			return "customer/" + p.Customer.ID, p.Version, nil
		},
	}
	if cfg.Destination == "" {
		reg.Once = func(ctx context.Context, pool *pgxpool.Pool, ev inbox.Event, c inbox.Claim) (int64, error) {
			p, err := parse(ev.Payload)
			if err != nil {
				return 0, err
			}
			row, err := demodb.New(pool).CustomerEventOnce(ctx, demodb.CustomerEventOnceParams{
				LockKey: advisory.Key(lockNamespace, p.Customer.ID), TimeoutMs: advisory.TimeoutMillis(cfg.LockTimeout),
				ExternalID: p.Customer.ID, Name: p.Customer.Name, Email: p.Customer.Email,
				Source: c.Source, EventID: c.EventID, Headers: c.Headers, Payload: c.Payload, Slot: c.Slot,
			})
			return row.EventRow, err
		}
	}
	return reg
}

// Upsert creates the customer if no customer has its external id, and
// updates it otherwise, in tx. It reports whether it created one. Under
// any number of concurrent callers for one id, exactly one creates: the
// check-then-insert runs under the advisory lock on the id (see the package
// documentation), taken and used in one statement, so one round trip does
// it all (internal/demo/demodb/schema.sql). A lock not granted
// within lockTimeout returns an error wrapping advisory.ErrLockTimeout.
func Upsert(ctx context.Context, tx pgx.Tx, c Customer, lockTimeout time.Duration) (bool, error) {
	key := advisory.Key(lockNamespace, c.ID)
	created, err := demodb.New(tx).CustomerUpsert(ctx, demodb.CustomerUpsertParams{
		LockKey: key, TimeoutMs: advisory.TimeoutMillis(lockTimeout), ExternalID: c.ID, Name: c.Name, Email: c.Email,
	})
	if err := advisory.Classify(err, key, lockTimeout); err != nil {
		return false, fmt.Errorf("create or update customer %s: %w", c.ID, err)
	}
	return created, nil
}

func announce(ctx context.Context, tx pgx.Tx, destination string, c Customer, created bool) error {
	topic := "customer.updated"
	if created {
		topic = "customer.created"
	}
	body, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode customer %s: %w", c.ID, err)
	}
	_, err = outbox.Enqueue(ctx, tx, outbox.Message{
		Topic: topic, Destination: destination, AggregateType: "customer", AggregateID: c.ID, Payload: body,
	})
	return err
}
