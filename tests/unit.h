/* Minimal test harness: every check prints one PASS/FAIL/SKIP line that
 * tests/run.sh counts. Checks compare bit patterns, never "close enough". */
#ifndef CIS2_UNIT_H
#define CIS2_UNIT_H
#include "cli/commands.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed;
#define CHECK(name, cond, ...)                                                                     \
    do {                                                                                           \
        if (cond) printf("PASS %s\n", name);                                                       \
        else {                                                                                     \
            printf("FAIL %s: ", name);                                                             \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            unit_failed++;                                                                         \
        }                                                                                          \
    } while (0)
#define SKIP(name, ...)                                                                            \
    do {                                                                                           \
        printf("SKIP %s: ", name);                                                                 \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)
#define UNIT_END() return unit_failed ? 1 : 0
#endif
