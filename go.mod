module github.com/sluice-mq/sluice

go 1.26
