/* vramledger: status codes shared by the whole library.
 *
 * Every fallible library function returns a vl_status and, where it takes
 * one, fills a caller-owned struct vl_err with a message for humans. The
 * message is left untouched on success. */
#ifndef VRAMLEDGER_STATUS_H
#define VRAMLEDGER_STATUS_H

#define VL_STATUS_MAP(X)                                                                           \
  X(OK, "ok")                                                                                      \
  X(ENOMEM, "out of memory")                                                                       \
  X(EPARSE, "malformed JSON")                                                                      \
  X(EKEY, "missing or invalid key")                                                                \
  X(EARCH, "unsupported architecture")                                                             \
  X(ERANGE, "value out of range")                                                                  \
  X(EOVERFLOW, "size does not fit in 64 bits")                                                     \
  X(EINVAL, "invalid argument")                                                                    \
  X(ECONFLICT, "conflicting options")                                                              \
  X(ENOTFOUND, "not found")                                                                        \
  X(EIO, "input/output error")

typedef enum {
#define VL__STATUS_ENUM(name, text) VL_##name,
  VL_STATUS_MAP(VL__STATUS_ENUM)
#undef VL__STATUS_ENUM
      VL_STATUS_COUNT
} vl_status;

#define VL_MUST_USE __attribute__((warn_unused_result))

/* Detail for a failed call: filled by the library, printed by the tool. */
struct vl_err {
  char msg[512];
};

/*! Short English name of a status; never NULL, static storage. */
const char *vl_strerror(vl_status s);

#endif
