/* The library's version string, for clients that load libcis2 at run time. */
#include "cis2.h"

const char *cis2_version(void) { return CIS2_VERSION; }
