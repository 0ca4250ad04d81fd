/* Debug fault injection (docs/divergence.md): deliberate, documented bugs
 * that prove the divergence localizer finds what it should. Faults live in
 * the engine that asked for them — a weight-bit flip is made in the
 * engine's own copy of that one tensor, never in the shared model. */
#ifndef CIS2_FAULT_H
#define CIS2_FAULT_H
#include "model/model.h"

typedef enum {
    CIS2_FAULT_NONE = 0,
    CIS2_FAULT_WEIGHT_BIT,    /* TENSOR:INDEX:BIT: one bit of one weight flipped */
    CIS2_FAULT_FMA,           /* LAYER: that layer's matmuls fused (emulated) */
    CIS2_FAULT_RMSNORM_ASSOC, /* x*(inv*w) instead of §8's (x*inv)*w */
    CIS2_FAULT_ROPE_OFFSET,   /* decode positions off by one */
    CIS2_FAULT_KV_STALE,      /* POS: that KV-cache slot never written */
    CIS2_FAULT_NO_FTZ         /* IEEE subnormals instead of §1.3's FTZ/DAZ */
} cis2_fault_kind;

typedef struct {
    cis2_fault_kind kind;
    int layer;  /* FMA */
    int pos;    /* KV_STALE */
    void *copy; /* WEIGHT_BIT: the engine's private copy of the flipped tensor */
} cis2_fault;

/* Validate --fault NAME / --fault-arg ARG for an engine of `backend` over
 * config c, and apply weight-bit to `w` (the engine's view of the model's
 * weights: the flipped tensor is copied and w points at the copy). */
int cis2_fault_setup(cis2_fault *f, const char *name, const char *arg, const char *backend,
                     const cis2_config *c, cis2_weights *w, char *err);
void cis2_fault_free(cis2_fault *f);
/* rmsnorm-assoc: out[i] = x[i]*(inv*w[i]). */
void cis2_fault_rmsnorm_assoc(const float *x, const float *w, int n, float eps, float *out);
/* fma: y[o] = fused-multiply-add chain over row o (emulated in double). */
void cis2_fault_fma_matvec(const float *w, int rows, int cols, const float *x, float *y);
/* fma on an int8 linear: the fused chain over (float)q[o, :], then * s[o]. */
void cis2_fault_fma_matvec_i8(const int8_t *q, const float *s, int rows, int cols, const float *x,
                              float *y);
#endif
