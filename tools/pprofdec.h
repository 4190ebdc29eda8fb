/*
 * A small reader of pprof files for `cprof top`: gunzips (when the input is
 * gzipped) and decodes profile.proto's Profile message into flat arrays,
 * then computes go tool pprof's -top table (granularity "functions"). It is
 * a parser of outside input: any byte string gives either a profile or an
 * error message, never a crash, and memory stays bounded by the input's
 * size. The decompressed size is capped (PPROFDEC_MAX_SIZE unless the
 * caller says otherwise): a gzip bomb is refused after at most that many
 * bytes of inflating, without being held in memory.
 */
#ifndef CPROF_TOOLS_PPROFDEC_H
#define CPROF_TOOLS_PPROFDEC_H

#include <stddef.h>
#include <stdint.h>

/* The largest decompressed profile accepted by default: profiles are
 * megabytes, not gigabytes. */
#define PPROFDEC_MAX_SIZE ((size_t)256 << 20)

/* The decoded form of a profile (its arrays and strings) may take up to
 * this many times the limit on its decompressed size, plus 1 MiB: real
 * profiles (cprof's and Go's) take 2 to 5 times their size, one built to
 * repeat tiny elements up to 32 times. Decoding one that would take more is
 * refused. */
#define PPROFDEC_DECODED_RATIO 8

/* What the functions below return, besides 0 and -1, when a profile is
 * larger than the limit they were given. */
#define PPROFDEC_ETOOBIG (-2)

/* Gunzips len bytes (one gzip member or several in a row) without keeping
 * more than max bytes of output: the stream is inflated once to measure it,
 * refused with PPROFDEC_ETOOBIG as soon as it passes max, then inflated
 * into a buffer of exactly its size. With out NULL only the first pass
 * runs, which checks the stream is complete and sets *outlen. Returns 0,
 * or -1 or PPROFDEC_ETOOBIG with a message in err; free *out. */
int pprofdec_gunzip(const unsigned char *data, size_t len, size_t max,
                    unsigned char **out, size_t *outlen, char *err,
                    size_t errlen);

/* Parses a size such as 1048576, 64K, 256MiB or 1G (powers of 1024, the
 * suffix in any case); 0 and sizes that do not fit are refused. Returns 0
 * or -1. */
int pprofdec_parse_size(const char *s, size_t *out);

/* Writes a limit for a message: "256 MiB" when it is a whole number of
 * KiB, MiB, GiB or TiB, else "1000-byte" (as in "the 1000-byte limit"). */
void pprofdec_format_size(char *out, size_t len, size_t bytes);

typedef struct pprofdec_value_type {
  const char *type, *unit;
} pprofdec_value_type;

typedef struct pprofdec_function {
  uint64_t id;
  const char *name, *filename;
} pprofdec_function;

typedef struct pprofdec_line {
  uint64_t function_id;
  int64_t line;
} pprofdec_line;

typedef struct pprofdec_mapping {
  uint64_t id;
  const char *filename;
} pprofdec_mapping;

typedef struct pprofdec_location {
  uint64_t id, mapping_id, address;
  size_t first_line, nlines; /* in pprofdec_profile.lines, innermost first */
} pprofdec_location;

typedef struct pprofdec_sample {
  size_t first_location, nlocations; /* in location_ids, leaf first */
  size_t first_value, nvalues;       /* in values */
} pprofdec_sample;

typedef struct pprofdec_profile {
  pprofdec_value_type *sample_types;
  size_t nsample_types;
  pprofdec_sample *samples;
  size_t nsamples;
  uint64_t *location_ids;
  size_t nlocation_ids;
  int64_t *values;
  size_t nvalues;
  pprofdec_location *locations; /* sorted by id */
  size_t nlocations;
  pprofdec_line *lines;
  size_t nlines;
  pprofdec_function *functions; /* sorted by id */
  size_t nfunctions;
  pprofdec_mapping *mappings; /* in file order */
  size_t nmappings;
  char **strings; /* NUL-terminated copies (cut at an embedded NUL) */
  size_t nstrings;
  const char **comments;
  size_t ncomments;
  const char *default_sample_type;       /* "" when unset */
  const char *main_file, *main_build_id; /* the first mapping's, or "" */
  pprofdec_value_type period_type;
  int64_t period, time_nanos, duration_nanos;
} pprofdec_profile;

/* Decodes len bytes (a gzipped or raw pprof) of at most PPROFDEC_MAX_SIZE
 * decompressed (and PPROFDEC_DECODED_RATIO times that decoded). Returns 0, or -1 or PPROFDEC_ETOOBIG with a message in err.
 * On success free the profile with pprofdec_free(). */
int pprofdec_decode(const unsigned char *data, size_t len, pprofdec_profile *p,
                    char *err, size_t errlen);

/* pprofdec_decode with the limit max instead of PPROFDEC_MAX_SIZE. */
int pprofdec_decode_max(const unsigned char *data, size_t len, size_t max,
                        pprofdec_profile *p, char *err, size_t errlen);

void pprofdec_free(pprofdec_profile *p);

/* The sample type pprof uses when none is asked for: default_sample_type
 * when it names one, else the last. */
size_t pprofdec_default_index(const pprofdec_profile *p);

/* Finds a sample type by name or by decimal index; -1 when none. */
long pprofdec_find_index(const pprofdec_profile *p, const char *which);

typedef struct pprofdec_row {
  /* The function's name; for a location without lines, pprof's name for
   * it: [the mapping file's base name], or <unknown>. */
  char *name;
  int64_t flat, cum;
  /* The kinds of its in-edges in the graph pprof prints, set by
   * pprofdec_top_calls (0 until then): PPROFDEC_INLINED for an edge whose
   * calls were all inlined, PPROFDEC_CALLED for one with a real call.
   * pprof prints "(inline)" for INLINED alone and "(partial-inline)" for
   * both. */
  unsigned calls;
} pprofdec_row;

#define PPROFDEC_INLINED 1u
#define PPROFDEC_CALLED 2u

typedef struct pprofdec_top {
  pprofdec_row *rows; /* in go tool pprof -top order */
  size_t nrows;
  int64_t total; /* the sum of the sample values with a stack */
} pprofdec_top;

/* go tool pprof -top's numbers for sample type index vi: flat is the value
 * of the samples whose innermost frame (the first line of the leaf
 * location) is the function, cum the value of the samples with the
 * function anywhere on the stack, counted once per sample. Rows are sorted
 * by |flat| descending, then name, then |cum| descending. Returns 0, or -1
 * with a message in err (a sample naming a location or function the
 * profile lacks, as pprof refuses it). Free with pprofdec_top_free(). */
int pprofdec_compute_top(const pprofdec_profile *p, size_t vi,
                         pprofdec_top *out, char *err, size_t errlen);

void pprofdec_top_free(pprofdec_top *t);

/* Sets the calls of t's rows (t from pprofdec_compute_top with the same p
 * and vi) as go tool pprof -top labels them when it shows only the first
 * nkept rows: pprof rebuilds its graph from the samples with only the kept
 * functions, so a kept function's caller is the nearest kept function
 * rootward of it on the stack, and the call is inlined when the callee is
 * not the outermost line of its location. An edge is inlined when every
 * sample has it so; edges whose |weight| is below edge_cutoff are dropped
 * (pprof's -edgefraction times the total). Rows from nkept on get 0.
 * Returns 0, or -1 with a message in err. */
int pprofdec_top_calls(const pprofdec_profile *p, size_t vi, pprofdec_top *t,
                       size_t nkept, int64_t edge_cutoff, char *err,
                       size_t errlen);

/* Formats v, in unit, the way pprof's measurement.ScaledLabel does into
 * to_unit ("auto" picks a unit per value, "minimum" is not accepted here;
 * a canonical name such as "ms" or "MB" scales to it). */
void pprofdec_format(char *out, size_t len, int64_t v, const char *unit,
                     const char *to_unit);

/* pprof's choice of one unit for a text report ("minimum"): the unit of the
 * smallest nonzero row value, or one 100 times larger when the total needs
 * a larger unit. Writes the canonical unit name into out ("" when the
 * sample unit is not a known one). */
void pprofdec_select_unit(char *out, size_t len, const pprofdec_top *t,
                          size_t nrows, const char *unit);

#endif
