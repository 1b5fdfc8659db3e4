package switchyard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// VerifyWebhook checks a delivery of a webhook destination, as its
// receiver gets it: the Standard Webhooks headers (webhook-id,
// webhook-timestamp within five minutes of now, webhook-signature) over
// body, the raw bytes received, under secret ("whsec_<base64 key>"). During
// a rotation the request carries one signature per secret of the
// destination, so checking with either the old or the new secret works.
// webhook-id is the message's id, the same on every attempt: use it to
// dedupe, for example as the Event.ID of Receive.
func VerifyWebhook(secret string, headers http.Header, body []byte) error {
	if err := webhook.Verify(secret, headers, body, webhook.DefaultTolerance, time.Now()); err != nil {
		return fmt.Errorf("switchyard: verify webhook: %w", err)
	}
	return nil
}

// SignWebhook sets the Standard Webhooks headers on h for a request with
// message id and body, signed with secret now: what a sender posting to
// an inbox source of scheme standard-webhooks does (and what tests of a
// receiver need).
func SignWebhook(h http.Header, secret, id string, body []byte) error {
	now := time.Now()
	sig, err := webhook.Sign(secret, id, now, body)
	if err != nil {
		return fmt.Errorf("switchyard: sign webhook: %w", err)
	}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, fmt.Sprint(now.Unix()))
	h.Set(webhook.HeaderSignature, sig)
	return nil
}
