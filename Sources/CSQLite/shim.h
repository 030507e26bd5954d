// SQLite for Swift: the header plus what the importer cannot express.
// No feature macros here: every shim in the package must agree on them.
#ifndef PLATFORM_PROXY_CSQLITE_SHIM_H
#define PLATFORM_PROXY_CSQLITE_SHIM_H

#include <sqlite3.h>

/* SQLITE_STATIC and SQLITE_TRANSIENT are casts in macros, which Swift does not import.
   STATIC: the caller keeps the bytes alive until the parameter is rebound or cleared.
   TRANSIENT: SQLite copies the bytes before the bind call returns. */
static const sqlite3_destructor_type CSQLITE_STATIC = SQLITE_STATIC;
static const sqlite3_destructor_type CSQLITE_TRANSIENT = SQLITE_TRANSIENT;

#endif
