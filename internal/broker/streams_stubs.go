package broker

type subRT struct{}

func (s *subRT) close() error                          { return nil }
func (s *subRT) maintain() error                       { return nil }
func (s *subRT) floor(int32) int64                     { return 1 << 62 }
func (s *subRT) addPartitions([]*partitionRT)          {}
func (s *streams) openSubscriptions(catalogData) error { return nil }

type groupRT struct{}

func openGroups(*streams) (*groupRT, error)    { return &groupRT{}, nil }
func (g *groupRT) setPartitions(string, int32) {}
func (g *groupRT) tick()                       {}
func (g *groupRT) close() error                { return nil }

type SubscriptionSettings struct{}
