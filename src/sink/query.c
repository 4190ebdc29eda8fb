/*
 * The HTTP endpoint's input parsers (see query.h). Everything here reads
 * bytes a remote client chose, so every loop is bounded by an explicit
 * length and every output by its buffer; nothing allocates, nothing keeps
 * state, and nothing may assume NUL termination of its input. The fuzzer
 * (fuzz/fuzz_query.c) holds these promises to account.
 */
#include "sink/query.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"

static int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decodes len bytes at s into out (which has room for len + 1 bytes);
 * plus_space turns '+' into ' ' (query) or keeps it (path). A "%00" is a
 * NUL inside the result, as Go's unescape makes it. Returns the decoded
 * length, or -1 with a reason in err (when err is not NULL). */
static long decode(const char *s, size_t len, char *out, bool plus_space,
                   char *err, size_t errlen) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '%') {
      int hi = i + 1 < len ? hexval((unsigned char)s[i + 1]) : -1;
      int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        if (!err) return -1;
        /* Go's url.EscapeError text, quoting at most the 3 bytes seen. */
        size_t n = len - i < 3 ? len - i : 3;
        char shown[4] = {0};
        for (size_t k = 0; k < n; k++) {
          unsigned char b = (unsigned char)s[i + k];
          shown[k] = b >= 0x20 && b < 0x7f && b != '"' ? (char)b : '?';
        }
        snprintf(err, errlen, "invalid URL escape \"%s\"", shown);
        return -1;
      }
      c = (unsigned char)(hi << 4 | lo);
      i += 2;
    } else if (c == '+' && plus_space) {
      c = ' ';
    }
    out[o++] = (char)c;
  }
  out[o] = 0;
  return (long)o;
}

int cprof__query_parse(cprof__query *q, const char *s, size_t len, char *err,
                       size_t errlen) {
  q->npairs = 0;
  if (len > CPROF__QUERY_MAX_LEN) {
    snprintf(err, errlen, "query string too long (limit %d bytes)",
             CPROF__QUERY_MAX_LEN);
    return CPROF_EINVAL;
  }
  char *out = q->storage;
  size_t i = 0;
  while (i < len) {
    size_t end = i;
    while (end < len && s[end] != '&') end++;
    /* Go (1.17 on) drops a pair holding ';', once a separator too. */
    if (end > i && !memchr(s + i, ';', end - i)) {
      size_t eq = i;
      while (eq < end && s[eq] != '=') eq++;
      size_t vstart = eq < end ? eq + 1 : end;
      /* Decoded into the free storage; kept only when both parts
       * decode, as Go keeps the pair. */
      long kn = decode(s + i, eq - i, out, true, NULL, 0);
      long vn = kn < 0 ? -1
                       : decode(s + vstart, end - vstart, out + kn + 1, true,
                                NULL, 0);
      if (vn >= 0) {
        if (q->npairs == CPROF__QUERY_MAX_PAIRS) {
          snprintf(err, errlen, "too many query parameters (limit %d)",
                   CPROF__QUERY_MAX_PAIRS);
          return CPROF_EINVAL;
        }
        cprof__query_pair *p = &q->pairs[q->npairs++];
        p->key = out;
        p->key_len = (size_t)kn;
        p->value = out + kn + 1;
        p->value_len = (size_t)vn;
        out += kn + 1 + vn + 1;
      }
    }
    i = end + 1;
  }
  return 0;
}

const char *cprof__query_value(const cprof__query *q, const char *key,
                               size_t *len) {
  size_t klen = strlen(key);
  for (size_t i = 0; i < q->npairs; i++)
    if (q->pairs[i].key_len == klen &&
        memcmp(q->pairs[i].key, key, klen) == 0) {
      if (len) *len = q->pairs[i].value_len;
      return q->pairs[i].value;
    }
  if (len) *len = 0;
  return NULL;
}

const char *cprof__query_get(const cprof__query *q, const char *key) {
  return cprof__query_value(q, key, NULL);
}

int cprof__path_decode(const char *s, size_t len, char *out, size_t outlen,
                       size_t *outlen_used, char *err, size_t errlen) {
  *outlen_used = 0;
  if (outlen == 0 || len > outlen - 1) {
    snprintf(err, errlen, "URL path too long");
    return CPROF_EINVAL;
  }
  long n = decode(s, len, out, false, err, errlen);
  if (n < 0) return CPROF_EINVAL;
  *outlen_used = (size_t)n;
  return 0;
}

size_t cprof__path_clean(const char *p, size_t len, char *out) {
  /* cleanPath: "" is "/", and a path is rooted. */
  bool trailing = len > 0 && p[len - 1] == '/';
  size_t w = 0, r = 0;
  out[w++] = '/';
  if (len > 0 && p[0] == '/') r = 1;
  /* path.Clean on the rooted path; out never holds more than "/" plus
   * what was read. */
  while (r < len) {
    if (p[r] == '/') {
      r++; /* an empty element */
    } else if (p[r] == '.' && (r + 1 == len || p[r + 1] == '/')) {
      r++; /* "." */
    } else if (p[r] == '.' && p[r + 1] == '.' &&
               (r + 2 == len || p[r + 2] == '/')) {
      r += 2; /* "..": back to the previous '/', never above the root */
      if (w > 1) {
        w--;
        while (w > 1 && out[w] != '/') w--;
      }
    } else {
      if (w != 1) out[w++] = '/';
      while (r < len && p[r] != '/') out[w++] = p[r++];
    }
  }
  if (trailing && w > 1) out[w++] = '/';
  out[w] = 0;
  return w;
}

size_t cprof__path_escape(const char *p, size_t len, char *out) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)p[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || (c && strchr("-._~$&+,/:;=@", c))) {
      out[o++] = (char)c;
    } else {
      out[o++] = '%';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = 0;
  return o;
}

cprof__int_parse cprof__go_parse_int(const char *s, size_t len, int64_t *out) {
  *out = 0;
  size_t i = 0;
  bool negative = false;
  if (len > 0 && (s[0] == '+' || s[0] == '-')) negative = s[i++] == '-';
  if (i == len) return CPROF__INT_SYNTAX;
  /* ParseUint's loop: a bad byte is a syntax error, but only until the
   * first digit that overflows 64 bits, which ends it as a range error. */
  uint64_t v = 0;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return CPROF__INT_SYNTAX;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) {
      v = UINT64_MAX;
      break;
    }
    v = v * 10 + d;
  }
  /* ParseInt's clamping. */
  if (!negative && v > (uint64_t)INT64_MAX) {
    *out = INT64_MAX;
    return CPROF__INT_RANGE;
  }
  if (negative && v > (uint64_t)INT64_MAX + 1) {
    *out = INT64_MIN;
    return CPROF__INT_RANGE;
  }
  *out = negative ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v)
                  : (int64_t)v;
  return CPROF__INT_OK;
}

bool cprof__go_atoi(const char *s, int64_t *out) {
  int64_t v;
  if (!s || cprof__go_parse_int(s, strlen(s), &v) != CPROF__INT_OK)
    return false;
  *out = v;
  return true;
}

bool cprof__parse_address(const char *s, size_t len, uint64_t *out) {
  unsigned base = 10;
  size_t i = 0;
  if (len >= 2 && s[0] == '0') {
    char p = s[1];
    if (p == 'x' || p == 'X')
      base = 16, i = 2;
    else if (p == 'o' || p == 'O')
      base = 8, i = 2;
    else if (p == 'b' || p == 'B')
      base = 2, i = 2;
    else
      base = 8, i = 1;
  }
  if (i == len) return false;
  uint64_t v = 0;
  for (; i < len; i++) {
    int d = hexval((unsigned char)s[i]);
    if (d < 0 || (unsigned)d >= base) return false;
    if (v > (UINT64_MAX - (unsigned)d) / base) return false;
    v = v * base + (unsigned)d;
  }
  *out = v;
  return true;
}

size_t cprof__symbol_addresses(const char *s, size_t len,
                               void (*fn)(uint64_t addr, void *ctx),
                               void *ctx) {
  size_t calls = 0, i = 0;
  while (i <= len) {
    size_t end = i;
    while (end < len && s[end] != '+') end++;
    uint64_t addr;
    if (cprof__parse_address(s + i, end - i, &addr) && addr != 0) {
      fn(addr, ctx);
      calls++;
    }
    i = end + 1;
  }
  return calls;
}

bool cprof__is_form_type(const char *s, size_t len) {
  static const char form[] = "application/x-www-form-urlencoded";
  const char *semi = memchr(s, ';', len);
  size_t end = semi ? (size_t)(semi - s) : len, start = 0;
  while (start < end && s[start] && strchr(" \t\n\v\f\r", s[start])) start++;
  while (end > start && s[end - 1] && strchr(" \t\n\v\f\r", s[end - 1])) end--;
  return end - start == sizeof form - 1 &&
         strncasecmp(s + start, form, sizeof form - 1) == 0;
}

bool cprof__host_is_loopback(const char *s, size_t len,
                             const char *listen_host) {
  /* Split host and port: "[v6]:port" or "name:port"; a bare IPv6 address
   * (more than one ':') is not a valid Host. */
  const char *host = s, *port = NULL;
  size_t hlen = len;
  bool bracketed = len > 0 && s[0] == '[';
  if (bracketed) {
    const char *close = memchr(s, ']', len);
    if (!close) return false;
    host = s + 1;
    hlen = (size_t)(close - host);
    size_t rest = len - (size_t)(close + 1 - s);
    if (rest > 0) {
      if (close[1] != ':') return false;
      port = close + 2;
    }
  } else {
    const char *colon = memchr(s, ':', len);
    if (colon) {
      if (memchr(colon + 1, ':', len - (size_t)(colon + 1 - s))) return false;
      hlen = (size_t)(colon - s);
      port = colon + 1;
    }
  }
  if (port) {
    size_t plen = len - (size_t)(port - s);
    if (plen == 0 || plen > 5) return false;
    for (size_t i = 0; i < plen; i++)
      if (port[i] < '0' || port[i] > '9') return false;
  }
  if (hlen == 0) return false;
  if (listen_host && strlen(listen_host) == hlen &&
      strncasecmp(listen_host, host, hlen) == 0)
    return true;
  char name[64];
  if (hlen >= sizeof name || memchr(host, 0, hlen)) return false;
  memcpy(name, host, hlen);
  name[hlen] = 0;
  if (bracketed) {
    struct in6_addr a6;
    if (inet_pton(AF_INET6, name, &a6) != 1) return false;
    return IN6_IS_ADDR_LOOPBACK(&a6) ||
           (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  }
  if (strcasecmp(name, "localhost") == 0) return true;
  struct in_addr a4;
  return inet_pton(AF_INET, name, &a4) == 1 &&
         (ntohl(a4.s_addr) >> 24) == 127;
}

/* True when the glen bytes at got are the token. Every byte of the token
 * is compared whatever the input, and the whole value counts (a NUL inside
 * it included), so the time taken says nothing about how much of it
 * matched. */
static bool token_eq(const char *token, const char *got, size_t glen) {
  size_t wlen = strlen(token);
  volatile unsigned char diff = glen != wlen;
  for (size_t i = 0; i < wlen; i++)
    diff |= (unsigned char)token[i] ^ (unsigned char)(i < glen ? got[i] : 0);
  return diff == 0;
}

/* Decodes padded base64 (len a multiple of 4) into out (cap bytes);
 * returns the bytes decoded, or -1 for anything else. */
static long b64_decode(const char *in, size_t len, unsigned char *out,
                       size_t cap) {
  if (len == 0 || len % 4 || len / 4 * 3 > cap) return -1;
  size_t n = 0;
  for (size_t i = 0; i < len; i += 4) {
    int v[4], pad = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char c = (unsigned char)in[i + (size_t)k];
      if (c == '=' && i + 4 == len && k >= 2) {
        v[k] = 0;
        pad++;
      } else if (pad || (v[k] = cprof__base64_value(c)) < 0) {
        return -1;
      }
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
                 (uint32_t)v[2] << 6 | (uint32_t)v[3];
    out[n++] = (unsigned char)(w >> 16);
    if (pad < 2) out[n++] = (unsigned char)(w >> 8);
    if (pad < 1) out[n++] = (unsigned char)w;
  }
  return (long)n;
}

/* Basic credentials longer than this are refused without decoding. */
#define BASIC_MAX 768

/* True when the len bytes at value start with scheme (case-insensitive,
 * its space included); sets *got and *glen to what follows, spaces
 * skipped. */
static bool auth_scheme(const char *value, size_t len, const char *scheme,
                        const char **got, size_t *glen) {
  size_t n = strlen(scheme);
  if (len < n || strncasecmp(value, scheme, n) != 0) return false;
  *got = value + n;
  *glen = len - n;
  while (*glen && **got == ' ') ++*got, --*glen;
  return true;
}

bool cprof__http_token_ok(const char *token, const char *authorization,
                          size_t len) {
  if (!token) return true;
  if (!authorization) return false;
  const char *got;
  size_t glen;
  if (auth_scheme(authorization, len, "Bearer ", &got, &glen))
    return token_eq(token, got, glen);
  /* HTTP Basic credentials, as go tool pprof sends a URL's user info
   * (http://pprof:TOKEN@host/...): any user name, the token as password. */
  if (auth_scheme(authorization, len, "Basic ", &got, &glen)) {
    unsigned char plain[BASIC_MAX / 4 * 3];
    long n = glen <= BASIC_MAX ? b64_decode(got, glen, plain, sizeof plain) : -1;
    if (n < 0) return false;
    const unsigned char *colon = memchr(plain, ':', (size_t)n);
    if (!colon) return false;
    size_t at = (size_t)(colon - plain) + 1;
    return token_eq(token, (const char *)plain + at, (size_t)n - at);
  }
  return false;
}
