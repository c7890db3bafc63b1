// Package app observes the applications behind a port: which process
// serves it (nginx, php-fpm or another), its effective configuration, the
// lines its logs gained during a run, and what its workers wait on.
//
// The kernel says that connections queue or fail; the application says
// why — a full worker pool, a slow backend, an exhausted descriptor table.
package app
