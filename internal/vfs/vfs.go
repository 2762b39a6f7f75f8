// Package vfs is the file-system seam under the storage engine.
//
// It owns the FS and File interfaces, the real implementation over the
// operating system (Default), and the test doubles that let storage prove its
// crash promises without a real power cut: a crashable in-memory FS that drops
// unsynced writes (MemFS), an error-injecting wrapper (ErrorFS) for ENOSPC,
// EIO and short writes, and a wrapper that counts open files and syncs
// (CountingFS) to prove bounds on descriptors and on fsyncs.
//
// Durability model (what MemFS enforces, and what storage must assume of a
// real disk): File.Sync makes a file's bytes durable, but not its name; a
// create, remove or rename is durable only after SyncDir of the directory
// holding the entry (both directories for a rename across them, the parent
// for a new directory). Anything not made durable may be lost, and an
// unsynced append may be kept in part, its last bytes garbled (a torn write).
//
// It must never know anything about segments, batches or queues.
package vfs

import (
	"io"
	"os"
)

// File is an open file. Reads are positional so that readers never race the
// single appender on a shared offset.
type File interface {
	io.ReaderAt
	io.Writer // appends at the end for files opened for writing
	io.Closer
	// Sync makes everything written so far durable (fdatasync on Linux).
	// An error from Sync is final: the caller must treat unsynced data as lost.
	Sync() error
	// Truncate cuts or extends the file to size bytes.
	Truncate(size int64) error
	// Size returns the current length of the file, including unsynced writes.
	Size() (int64, error)
	// Name returns the path the file was opened with.
	Name() string
}

// OSFile is implemented by files backed by a real *os.File, so a network
// front-end can send a byte range straight to a socket (sendfile) without
// copying it through user space.
type OSFile interface {
	OSFile() *os.File
}

// FS is the set of file-system operations storage needs.
type FS interface {
	// Create creates name (truncating it if it exists), open for reading and
	// appending.
	Create(name string) (File, error)
	// OpenAppend opens an existing file for reading and appending at its end.
	OpenAppend(name string) (File, error)
	// Open opens an existing file for reading only.
	Open(name string) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// SyncDir makes the creation, removal and renaming of entries in dir durable.
	SyncDir(dir string) error
	// Stat reports whether name exists and its size.
	Stat(name string) (os.FileInfo, error)
}
