module github.com/sluice-mq/sluice

go 1.26.0

require (
	github.com/twmb/franz-go v1.22.3 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
)
