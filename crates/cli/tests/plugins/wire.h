/* Minimal protobuf wire-format code for test plugins: list a GraphDef's nodes and remove
 * Identity-like nodes, rewiring their consumers to the removed node's first input.
 *
 * Independent of any TensorFlow or unbound header (plain bytes in, malloc'd bytes out), so the
 * cargo fixtures (plugin_abi.h) and the interop probe (TensorFlow's grappler.h) share it.
 *
 * Only the fields it needs are interpreted: GraphDef.node = 1, NodeDef.name = 1, op = 2,
 * input = 3. Every other field is copied through byte for byte. */
#ifndef UNBOUND_TEST_WIRE_H_
#define UNBOUND_TEST_WIRE_H_

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *p;
  size_t n;
} wire_str;

typedef struct {
  wire_str name;
  wire_str op;
  wire_str first_input; /* first non-control input; n == 0 if none */
  const uint8_t *msg;   /* the NodeDef's bytes */
  size_t len;
} wire_node;

/* Reads a varint; returns 0 on truncation or overlong encoding. */
static int wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return 0;
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 1;
    }
  }
  return 0;
}

/* Reads one field: its number, wire type, and (for length-delimited fields) its payload.
 * `start` is set to the first byte of the field (its tag). Returns 0 on malformed input. */
static int wire_field(const uint8_t **p, const uint8_t *end, const uint8_t **start,
                      uint32_t *field, uint32_t *type, const uint8_t **payload, size_t *len) {
  uint64_t tag, v;
  *start = *p;
  if (!wire_varint(p, end, &tag)) return 0;
  *field = (uint32_t)(tag >> 3);
  *type = (uint32_t)(tag & 7);
  *payload = NULL;
  *len = 0;
  switch (*type) {
    case 0: return wire_varint(p, end, &v);
    case 1: if (end - *p < 8) return 0; *p += 8; return 1;
    case 5: if (end - *p < 4) return 0; *p += 4; return 1;
    case 2:
      if (!wire_varint(p, end, &v) || v > (uint64_t)(end - *p)) return 0;
      *payload = *p;
      *len = (size_t)v;
      *p += v;
      return 1;
    default: return 0; /* groups are not used by TensorFlow protos */
  }
}

static int wire_parse_node(const uint8_t *msg, size_t len, wire_node *node) {
  const uint8_t *p = msg, *end = msg + len, *start, *payload;
  uint32_t field, type;
  size_t n;
  memset(node, 0, sizeof *node);
  node->msg = msg;
  node->len = len;
  while (p < end) {
    if (!wire_field(&p, end, &start, &field, &type, &payload, &n)) return 0;
    if (type != 2) continue;
    wire_str s = {(const char *)payload, n};
    if (field == 1) node->name = s;
    if (field == 2) node->op = s;
    if (field == 3 && node->first_input.n == 0 && !(n > 0 && s.p[0] == '^'))
      node->first_input = s;
  }
  return 1;
}

/* Lists the nodes of a serialized GraphDef into a malloc'd array (caller frees).
 * Returns the node count, or -1 if the bytes are not a GraphDef this code can read. */
static long wire_graph_nodes(const uint8_t *g, size_t len, wire_node **out) {
  const uint8_t *p = g, *end = g + len, *start, *payload;
  uint32_t field, type;
  size_t n, count = 0, cap = 16;
  wire_node *nodes = malloc(cap * sizeof *nodes);
  while (p < end) {
    if (!wire_field(&p, end, &start, &field, &type, &payload, &n)) goto bad;
    if (field != 1 || type != 2) continue;
    if (count == cap) nodes = realloc(nodes, (cap *= 2) * sizeof *nodes);
    if (!wire_parse_node(payload, n, &nodes[count++])) goto bad;
  }
  *out = nodes;
  return (long)count;
bad:
  free(nodes);
  return -1;
}

static int wire_str_eq(wire_str a, const char *b, size_t bn) {
  return a.n == bn && memcmp(a.p, b, bn) == 0;
}

/* A growable output buffer. */
typedef struct {
  uint8_t *p;
  size_t n, cap;
} wire_buf;

static void wire_put(wire_buf *b, const void *data, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, data, n);
  b->n += n;
}

static void wire_put_varint(wire_buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  wire_put(b, tmp, n);
}

static void wire_put_bytes(wire_buf *b, uint32_t field, const void *data, size_t n) {
  wire_put_varint(b, ((uint64_t)field << 3) | 2);
  wire_put_varint(b, n);
  wire_put(b, data, n);
}

/* The node part of an input string "^name", "name", "name:1". */
static wire_str wire_input_node(wire_str in) {
  if (in.n && in.p[0] == '^') in.p++, in.n--;
  for (size_t i = 0; i < in.n; i++)
    if (in.p[i] == ':') in.n = i;
  return in;
}

/* Whether input "x" / "x:0" / "^x" refers to output 0 (control inputs count as port 0). */
static int wire_is_port0(wire_str in) {
  wire_str node = wire_input_node(in);
  size_t rest = (size_t)(in.p + in.n - (node.p + node.n));
  return rest == 0 || (rest == 2 && in.p[in.n - 1] == '0');
}

/* Index of the node named `name` among `drop` marked nodes, or -1. */
static long wire_find_dropped(const wire_node *nodes, const char *drop, long count, wire_str name) {
  for (long i = 0; i < count; i++)
    if (drop[i] && wire_str_eq(nodes[i].name, name.p, name.n)) return i;
  return -1;
}

/* Removes from GraphDef `g` every node for which `should_drop(node, ctx)` is true and which has
 * a data input, rewiring consumers: "x" / "x:0" becomes the dropped node's first input (followed
 * through chains of dropped nodes), "^x" becomes "^" + that input's node. Only meaningful for
 * single-output pass-through ops such as Identity. Writes a malloc'd GraphDef to *out / *out_len
 * and returns the number of nodes removed, or -1 if `g` cannot be parsed. */
static long wire_remove_nodes(const uint8_t *g, size_t len,
                              int (*should_drop)(const wire_node *node, void *ctx), void *ctx,
                              uint8_t **out, size_t *out_len) {
  wire_node *nodes;
  long count = wire_graph_nodes(g, len, &nodes);
  if (count < 0) return -1;
  char *drop = calloc((size_t)count + 1, 1);
  long removed = 0;
  for (long i = 0; i < count; i++)
    if (nodes[i].first_input.n && should_drop(&nodes[i], ctx)) drop[i] = 1, removed++;

  wire_buf b = {0};
  const uint8_t *p = g, *end = g + len, *start, *payload;
  uint32_t field, type;
  size_t n;
  long node_index = 0;
  while (p < end) {
    wire_field(&p, end, &start, &field, &type, &payload, &n); /* parsed once already */
    if (field != 1 || type != 2) {
      wire_put(&b, start, (size_t)(p - start));
      continue;
    }
    if (drop[node_index++]) continue;
    /* Re-encode the kept node with its inputs rewritten. */
    wire_buf nb = {0};
    const uint8_t *q = payload, *qend = payload + n, *qstart, *qpay;
    uint32_t qf, qt;
    size_t qn;
    while (q < qend) {
      wire_field(&q, qend, &qstart, &qf, &qt, &qpay, &qn);
      if (qf != 3 || qt != 2) {
        wire_put(&nb, qstart, (size_t)(q - qstart));
        continue;
      }
      wire_str in = {(const char *)qpay, qn};
      int control = qn && in.p[0] == '^';
      wire_str target = wire_input_node(in);
      long d = wire_find_dropped(nodes, drop, count, target);
      if (d < 0 || !wire_is_port0(in)) {
        wire_put(&nb, qstart, (size_t)(q - qstart));
        continue;
      }
      wire_str repl = nodes[d].first_input;
      for (long hops = 0; hops < count; hops++) { /* follow chains of dropped nodes */
        wire_str rn = wire_input_node(repl);
        long next = wire_find_dropped(nodes, drop, count, rn);
        if (next < 0 || !wire_is_port0(repl)) break;
        repl = nodes[next].first_input;
      }
      if (control) {
        wire_str rn = wire_input_node(repl);
        wire_buf cb = {0};
        wire_put(&cb, "^", 1);
        wire_put(&cb, rn.p, rn.n);
        wire_put_bytes(&nb, 3, cb.p, cb.n);
        free(cb.p);
      } else {
        wire_put_bytes(&nb, 3, repl.p, repl.n);
      }
    }
    wire_put_bytes(&b, 1, nb.p, nb.n);
    free(nb.p);
  }
  free(drop);
  free(nodes);
  if (!b.p) b.p = malloc(1); /* an empty GraphDef is still a valid, non-null buffer */
  *out = b.p;
  *out_len = b.n;
  return removed;
}

#endif /* UNBOUND_TEST_WIRE_H_ */
