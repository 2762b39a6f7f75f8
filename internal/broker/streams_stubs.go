package broker

type subRT struct{}

func (s *subRT) close() error                          { return nil }
func (s *subRT) maintain() error                       { return nil }
func (s *subRT) floor(int32) int64                     { return 1 << 62 }
func (s *subRT) addPartitions([]*partitionRT)          {}
func (s *streams) openSubscriptions(catalogData) error { return nil }

type SubscriptionSettings struct{}
