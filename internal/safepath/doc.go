// Package safepath creates the files and directories netdoctor writes as
// root where another local user cannot decide what they are: a private
// directory no one else created or can enter (PrivateDir), a file named
// on the command line that is a regular file, 0600, not written through
// another user's symlink, into another user's file or through a hard
// link, never blocking on a FIFO (Create), and a file netdoctor is
// about to act on that only root or the caller could have written
// (CheckOwned). Anyone may create a name in /tmp first; these are the
// checks that make that harmless.
package safepath
