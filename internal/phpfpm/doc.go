// Package phpfpm describes a running php-fpm: which master a process is,
// the limits of each pool with the file and line that set them, and the
// live numbers of a pool's status page.
//
// ParseMaster reads the title php-fpm writes over its command line, Load
// reads the configuration the way php-fpm 8.2 reads it (sapi/fpm/fpm/
// fpm_conf.c: one line at a time through the Zend INI scanner, include
// globs resolved against the prefix, $pool expanded in strings, defaults
// and relative paths applied after parsing), and Status asks a pool's
// listen socket for its status page over FastCGI. The caller dials, so the
// socket may live in another network namespace; Load reads through an
// fs.FS, so the files may live in another mount namespace
// (os.DirFS("/proc/PID/root")).
//
// Load tolerates what a human editor leaves behind: a damaged or truncated
// file returns everything that parsed together with an error wrapping
// ErrPartial, each problem carrying its file and line. Keys php-fpm does
// not know are kept in Directives and otherwise ignored, where php-fpm
// would refuse to start.
package phpfpm
