package broker

import "github.com/sluice-mq/sluice/internal/diskguard"

// Errors of the disk (package diskguard), re-exported so front-ends need
// only this package. Match them with errors.Is; their messages name no
// file of the server's.
var (
	ErrStorageFull   = diskguard.ErrFull   // sends, produces and creates are refused until space is freed
	ErrStorageFailed = diskguard.ErrFailed // the disk answered an I/O error
)

// StorageError is a write the disk refused (diskguard.Error).
type StorageError = diskguard.Error

// DefaultHeadroomBytes is Options.HeadroomBytes's default.
const DefaultHeadroomBytes = diskguard.DefaultHeadroom
