package broker

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// SubscriptionSettings are a fan-out subscription's attributes. A
// subscription is a queue over a topic: every record of the topic is
// delivered to each subscription, which has its own visibility, retries,
// delays and dead-letter queue.
type SubscriptionSettings struct {
	Topic     string    `json:"topic"`
	Name      string    `json:"name"`
	ID        uint64    `json:"id"` // names its directory; never reused
	CreatedAt time.Time `json:"created_at"`

	// KeyOrdered delivers each key's records in offset order, one in
	// flight per key, parallel across keys (records without a key are not
	// ordered).
	KeyOrdered bool `json:"key_ordered,omitempty"`
	// FromEarliest starts the subscription at the topic's log start instead
	// of its end (only read at creation).
	FromEarliest bool `json:"from_earliest,omitempty"`

	VisibilityTimeout time.Duration `json:"visibility_timeout"` // default 30 s
	MaxExtension      time.Duration `json:"max_extension"`      // default 12 h, at most the topic's retention
	DeliveryDelay     time.Duration `json:"delivery_delay,omitempty"`
	// MaxReceives > 0 with DeadLetterQueue (a broker queue) moves a record
	// delivered that often to the queue instead of delivering it again.
	MaxReceives     int    `json:"max_receives,omitempty"`
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
}

var subNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,120}$`)

func subKey(topic, name string) string { return topic + "/" + name }

func (s *SubscriptionSettings) normalize() {
	if s.VisibilityTimeout == 0 {
		s.VisibilityTimeout = DefaultVisibility
	}
	if s.MaxExtension == 0 {
		s.MaxExtension = DefaultMaxExtension
	}
}

func (s *SubscriptionSettings) validate() error {
	switch {
	case !subNameRE.MatchString(s.Name):
		return invalid("name", "%q: want 1-120 letters, digits, '.', '_' or '-'", s.Name)
	case s.VisibilityTimeout < 0 || s.VisibilityTimeout > MaxVisibility:
		return invalid("visibility_timeout", "%v: want 0 to %v", s.VisibilityTimeout, MaxVisibility)
	case s.MaxExtension < s.VisibilityTimeout:
		return invalid("max_extension", "%v: must be at least the visibility timeout", s.MaxExtension)
	case s.DeliveryDelay < 0 || s.DeliveryDelay > 15*time.Minute:
		return invalid("delivery_delay", "%v: want 0 to 15m", s.DeliveryDelay)
	case s.MaxReceives < 0 || s.MaxReceives > queue.MaxReceivesLimit:
		return invalid("max_receives", "%d: want 0 to %d", s.MaxReceives, queue.MaxReceivesLimit)
	case (s.MaxReceives > 0) != (s.DeadLetterQueue != ""):
		return invalid("max_receives", "a receive limit and a dead-letter queue go together")
	}
	return nil
}

// cursorConfig derives a partition cursor's config. Its retention is the
// topic's, so a record past the topic's retention expires from the
// subscription instead of holding the log forever.
func (s SubscriptionSettings) cursorConfig(ts TopicSettings) queue.Config {
	ret := ts.Retention
	if ret <= 0 || ret > queue.MaxRetention {
		ret = queue.MaxRetention
	}
	ret = max(ret, time.Minute)
	ext := min(s.MaxExtension, ret)
	return queue.Config{
		Visibility: min(s.VisibilityTimeout, ext), MaxExtension: ext,
		MaxReceives: s.MaxReceives, FIFO: s.KeyOrdered, Retention: ret,
	}
}

func subDir(t *topicRT, s SubscriptionSettings) string {
	return filepath.Join(t.dir, "subs", fmt.Sprintf("%d-%s", s.ID, s.Name))
}

// CreateSubscription adds a fan-out subscription to a topic. It starts at
// the topic's end unless FromEarliest.
func (b *Broker) CreateSubscription(s SubscriptionSettings) (SubscriptionSettings, error) {
	s.normalize()
	if err := s.validate(); err != nil {
		return SubscriptionSettings{}, err
	}
	if c := b.clusterTopic(s.Topic); c != nil {
		return c.createSubscription(s) // cluster_subs.go
	}
	st := b.streams
	st.admin.Lock()
	defer st.admin.Unlock()
	t, err := st.topic(s.Topic)
	if err != nil {
		return SubscriptionSettings{}, err
	}
	t.mu.RLock()
	exists := t.subs[s.Name] != nil
	t.mu.RUnlock()
	if exists {
		return SubscriptionSettings{}, fmt.Errorf("%w: %s", ErrSubscriptionExists, subKey(s.Topic, s.Name))
	}
	if s.DeadLetterQueue != "" {
		if _, err := b.queue(s.DeadLetterQueue); err != nil {
			return SubscriptionSettings{}, err
		}
	}
	if err := b.disk.Admit(); err != nil {
		return SubscriptionSettings{}, err
	}
	s.CreatedAt = b.now()
	if s.ID, err = b.cat.allocID(); err != nil {
		return SubscriptionSettings{}, b.disk.Note(err)
	}
	sub, err := createEntity(b, subDir(t, s), s, func() (*subRT, error) { return openSub(t, s, true) })
	if err != nil {
		return SubscriptionSettings{}, err
	}
	t.mu.Lock()
	t.subs[s.Name] = sub
	t.mu.Unlock()
	return s, nil
}

// DeleteSubscription removes a subscription and its state; the records it
// held become subject to the topic's retention.
func (b *Broker) DeleteSubscription(topic, name string) error {
	if c := b.clusterTopic(topic); c != nil {
		return c.deleteSubscription(topic, name)
	}
	st := b.streams
	st.admin.Lock()
	defer st.admin.Unlock()
	t, sub, err := b.subscription(topic, name)
	if err != nil {
		return err
	}
	if err := b.cat.drop(sub.dir); err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.subs, name)
	t.mu.Unlock()
	if err := sub.close(); err != nil {
		b.log.Warn("closing deleted subscription", "subscription", subKey(topic, name), "err", err)
	}
	return vfs.RemoveAll(b.opts.FS, sub.dir)
}

// GetSubscription returns a subscription's settings.
func (b *Broker) GetSubscription(topic, name string) (SubscriptionSettings, error) {
	if c := b.clusterTopic(topic); c != nil {
		return c.subscription(topic, name)
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return SubscriptionSettings{}, err
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.settings, nil
}

// ListSubscriptions returns a topic's subscriptions, sorted by name.
func (b *Broker) ListSubscriptions(topic string) ([]SubscriptionSettings, error) {
	if c := b.clusterTopic(topic); c != nil {
		return c.listSubscriptions(topic)
	}
	t, err := b.streams.topic(topic)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	subs := make([]*subRT, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.RUnlock()
	out := make([]SubscriptionSettings, 0, len(subs))
	for _, s := range subs {
		s.mu.Lock()
		out = append(out, s.settings)
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (b *Broker) subscription(topic, name string) (*topicRT, *subRT, error) {
	t, err := b.streams.topic(topic)
	if err != nil {
		return nil, nil, err
	}
	t.mu.RLock()
	sub := t.subs[name]
	t.mu.RUnlock()
	if sub == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrSubscriptionNotFound, subKey(topic, name))
	}
	return t, sub, nil
}

// openSubscriptions opens the catalog's subscriptions at start.
func (s *streams) openSubscriptions(data catalogData) error {
	for key, ss := range data.Subscriptions {
		t := s.topics[ss.Topic]
		if t == nil {
			s.b.log.Warn("subscription of a missing topic ignored", "subscription", key)
			continue
		}
		sub, err := openSub(t, ss, false)
		if err != nil {
			return fmt.Errorf("broker: subscription %s: %w", key, err)
		}
		t.subs[ss.Name] = sub
	}
	return nil
}

// SubscriptionsDeadLetteringTo lists the subscriptions ("topic/name") whose
// dead-letter queue is queue, so that deleting the queue can be refused
// while one still needs it (as for queues' dead-letter targets).
func (b *Broker) SubscriptionsDeadLetteringTo(queue string) []string {
	var out []string
	for _, t := range b.streams.topicList() {
		subs, _ := b.ListSubscriptions(t.name)
		for _, s := range subs {
			if s.DeadLetterQueue == queue {
				out = append(out, subKey(s.Topic, s.Name))
			}
		}
	}
	return out
}
