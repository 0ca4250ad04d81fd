/* The verify layer's internal interface: receipts (public API in cis2.h)
 * and their shared helpers. */
#ifndef CIS2_VERIFY_H
#define CIS2_VERIFY_H
#include "engine/backend.h"
#endif
