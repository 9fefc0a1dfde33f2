/* The training replay of vision models (train_replay.h): ResNet's
 * convolutions, batch norms and residual blocks; ViT's patch embedding
 * (its layers are an encoder's: train_replay_encoder.c). */
#include <math.h>

#include "conv_tables.h"
#include "train_replay.h"

/* cuDNN's workspace for a convolution: with benchmark off, the first plan
 * cuDNN's heuristics give is run with the workspace it asks for, taken
 * through the caching allocator and freed when the call returns
 * (aten/src/ATen/native/cudnn/Conv_v8.cpp). The heuristics pick by shape:
 * a 1x1 of stride 1 asks for none forward at 56 x 56 and 37 MiB at 14 x 14
 * with 1,024 channels (64 images), its backward's split-K plans 0.01 to 32
 * times its output. So a shape cuDNN was measured on takes its own
 * (conv_tables.h, data/reference/h100-torch-2.11/conv-workspace.json:
 * ResNet-50's 23 shapes at 8-64 images of 64-512 pixels), between the
 * measured sizes linear in the log of the output's rows, the nearest
 * outside them; another shape the medians over those of its kernel and
 * stride, in output bytes (the forward's, and the larger of the
 * backward's two, the input's and the weight's gradient): 16-bit and
 * TF32 alike within 10-20 % */
struct conv_ws {
  uint64_t k, st;
  double fwd, bwd; /* bytes a byte of output */
};
static const struct conv_ws conv_ws_16[] = {
    {1, 1, 0, 0.64}, {1, 2, 3.0, 3.0}, {3, 1, 2.05, 2.31}, {3, 2, 5.18, 5.38}, {7, 2, 1.5, 1.68}};
static const struct conv_ws conv_ws_32[] = {
    {1, 1, 0, 0.64}, {1, 2, 3.0, 3.06}, {3, 1, 2.16, 2.72}, {3, 2, 5.36, 6.13}, {7, 2, 1.19, 1.31}};

static const struct conv_ws *workspace_of(uint64_t k, uint64_t st, uint64_t e) {
  const struct conv_ws *t = e == 4 ? conv_ws_32 : conv_ws_16;
  for (size_t i = 0; i < sizeof conv_ws_16 / sizeof conv_ws_16[0]; i++)
    if (t[i].k == k && t[i].st == st) return &t[i];
  return NULL; /* a shape ResNet does not have: none */
}

/* the workspaces of a k x k convolution of stride st, cin -> cout
 * channels, `rows` output rows, e bytes an element (conv_tables.h): its
 * forward's, its input gradient's, its weight gradient's; false where
 * that shape was never measured */
static bool measured_ws(uint64_t k, uint64_t st, uint64_t cin, uint64_t cout, uint64_t e,
                        double rows, double ws[3]) {
  const struct vl_conv_ws_row *lo = NULL, *hi = NULL;
  for (size_t i = 0; i < sizeof vl_conv_ws_rows / sizeof vl_conv_ws_rows[0]; i++) {
    const struct vl_conv_ws_row *r = &vl_conv_ws_rows[i];
    if (r->k != k || r->st != st || r->cin != cin || r->cout != cout || r->bytes != e) continue;
    if (r->rows <= rows && (!lo || r->rows > lo->rows)) lo = r;
    if (r->rows >= rows && (!hi || r->rows < hi->rows)) hi = r;
  }
  if (!lo && !hi) return false;
  if (!lo) lo = hi;
  if (!hi) hi = lo;
  const double w =
      hi->rows > lo->rows ? log(rows / lo->rows) / log((double)hi->rows / lo->rows) : 0;
  const double l[3] = {(double)lo->fwd, (double)lo->dgrad, (double)lo->wgrad};
  const double h[3] = {(double)hi->fwd, (double)hi->dgrad, (double)hi->wgrad};
  for (int i = 0; i < 3; i++)
    ws[i] = l[i] + w * (h[i] - l[i]);
  return true;
}

/* a convolution (autocast: in its dtype) of x into out_elems elements,
 * its batch norm (saves its input: the convolution's output; its own
 * output goes on), and a ReLU that saves its output, or none (relu false:
 * the output returned as the norm's) (modeling_resnet.py ResNetConvLayer) */
static uint32_t conv_bn(struct run *R, uint32_t x, uint64_t xb, uint64_t out_elems, uint64_t in_ch,
                        uint64_t out_ch, uint64_t k, uint64_t st, bool relu) {
  const uint64_t e = R->z->e, wb = R->z->wb;
  uint32_t w = base_param(R, out_ch * in_ch * k * k * wb);
  const bool trained = R->tp.t[w].rg;
  uint32_t cast = 0, in = x, wc = 0;
  if (R->z->autocast) {
    wc = op(R, (struct tape_op){.out_bytes = out_ch * in_ch * k * k * 2, .in = {w}});
    if (trained) vl__tr_push(&R->p, &R->cached, wc);
    w = wc;
    if (xb != e)
      in = cast = op(R, (struct tape_op){.out_bytes = R->tp.t[x].bytes / xb * e, .in = {x}});
  }
  /* the forward's, the input gradient's and the weight gradient's (the
   * medians: all the backward's on the weight's) */
  const struct conv_ws *ws = workspace_of(k, st, e);
  const double ob = (double)(out_elems * e);
  double s[3] = {ws ? ws->fwd * ob : 0, 0, ws ? ws->bwd * ob : 0};
  measured_ws(k, st, in_ch, out_ch, e, (double)(out_elems / out_ch), s);
  uint32_t c = op(R, (struct tape_op){.out_bytes = out_elems * e,
                                      .in = {in, w},
                                      .saved = {in, R->z->autocast ? w : 0},
                                      .tmp_in = {(uint64_t)s[1], (uint64_t)s[2]},
                                      .mm = true,
                                      .conv = true});
  if (s[0] > 0) vl__tr_block(&R->p, (uint64_t)s[0], NULL);
  rel(R, cast);
  if (!trained) rel(R, wc);
  uint32_t bn = op(R, (struct tape_op){.out_bytes = out_elems * e, .in = {c}, .saved = {c}});
  rel(R, c);
  if (!relu) return bn;
  uint32_t y = op(R, (struct tape_op){.out_bytes = out_elems * e, .in = {bn}, .save_out = true});
  rel(R, bn);
  return y;
}

/* `y += res` (an in-place add: y's block is the sum's, nothing new) */
static uint32_t add_into(struct run *R, uint32_t y, uint32_t res) {
  uint32_t sum = op(R, (struct tape_op){.out_bytes = 0, .in = {y, res}, .pass = TAPE_ADD});
  if (sum) {
    R->tp.t[sum].h = R->tp.t[y].h, R->tp.t[sum].bytes = R->tp.t[y].bytes;
    R->tp.t[y].h = NONE;
  }
  rel(R, y);
  return sum;
}

/* max_pool2d_with_indices over x into `elems` elements: its output, then
 * its int64 indices, both kept with x for the backward (the order the H200
 * history of ResNet-50 AMP shows: a24.5 a98 at 64 x 224 pixels,
 * bench/results/reserved/raw.jsonl:history-resnet/) */
static uint32_t max_pool(struct run *R, uint32_t x, uint64_t elems) {
  uint32_t mp = op(R, (struct tape_op){.out_bytes = elems * R->z->e, .in = {x}, .saved = {x}});
  uint32_t idx = tape_new(&R->tp, elems * 8);
  tape_also_saves(&R->tp, mp, idx);
  rel(R, idx);
  return mp;
}

/* ResNet on the pixels: the stem (7x7 convolution of stride 2, max pool
 * of stride 2 saving its int64 indices), the stages of blocks (a
 * bottleneck's 1x1, 3x3 with the stage's stride, 1x1; a basic block's two
 * 3x3), then the shortcut where the width or the stride changes, the
 * residual added in place into the layer's output, the ReLU after it; the
 * average pool: B x width (modeling_resnet.py ResNetEmbeddings,
 * ResNetBottleNeckLayer, ResNetBasicLayer) */
static uint32_t resnet(struct run *R, uint32_t px, uint64_t pxb) {
  const struct vl_arch *A = R->arch;
  const uint64_t B = R->z->B, e = R->z->e;
  uint64_t side = vl__div_ceil(R->z->side, 2); /* 7x7, stride 2, padding 3 */
  uint32_t x =
      conv_bn(R, px, pxb, B * A->stem_width * side * side, A->channels, A->stem_width, 7, 2, true);
  side = vl__div_ceil(side, 2); /* the max pool: 3x3, stride 2, padding 1 */
  uint32_t mp = max_pool(R, x, B * A->stem_width * side * side);
  rel(R, x);
  x = mp;
  uint64_t in = A->stem_width;
  for (uint64_t s = 0; s < A->stages && !R->p.failed; s++) {
    const uint64_t out = A->stage_width[s], st = s > 0 || A->stride_first ? 2 : 1;
    for (uint64_t l = 0; l < A->stage_depth[s] && !R->p.failed; l++) {
      /* (3x3 of padding 1 and 1x1 of padding 0 at stride 2 both give
       * ceil(side / 2)) */
      const uint64_t cin = l ? out : in, str = l ? 1 : st, so = vl__div_ceil(side, str);
      uint32_t y;
      if (A->bottleneck) {
        const uint64_t red = out / 4;
        uint32_t a = conv_bn(R, x, e, B * red * side * side, cin, red, 1, 1, true);
        uint32_t b = conv_bn(R, a, e, B * red * so * so, red, red, 3, str, true);
        rel(R, a);
        y = conv_bn(R, b, e, B * out * so * so, red, out, 1, 1, false);
        rel(R, b);
      } else {
        uint32_t a = conv_bn(R, x, e, B * out * so * so, cin, out, 3, str, true);
        y = conv_bn(R, a, e, B * out * so * so, out, out, 3, 1, false);
        rel(R, a);
      }
      /* the shortcut after the layer (ResNetBottleNeckLayer.forward) */
      const uint32_t res = !l && (cin != out || str != 1)
                               ? conv_bn(R, x, e, B * out * so * so, cin, out, 1, str, false)
                               : tape_ref(&R->tp, x);
      rel(R, x);
      uint32_t sum = add_into(R, y, res);
      x = op(R,
             (struct tape_op){.out_bytes = B * out * so * so * e, .in = {sum}, .save_out = true});
      rel(R, sum);
      rel(R, res); /* `residual`, to the block's return */
      if (!l) side = so;
    }
    in = out;
  }
  uint32_t pooled = op(R, (struct tape_op){.out_bytes = B * in * e, .in = {x}});
  rel(R, x);
  return pooled;
}

/* a vision model's embeddings in place of the word embeddings x (taken
 * over): the loop's pixel_values, then ResNet's stages and pooling, or
 * ViT's patches, a convolution of the pixels as a linear, the [CLS] token
 * concatenated, the positions added (ViTEmbeddings) */
uint32_t vl__tr_vision_embeddings(struct run *R, uint32_t x) {
  const struct vl_arch *arch = R->arch;
  const uint64_t Th = R->T * R->z->h, r = R->z->r;
  const uint64_t pix = R->z->B * arch->channels * R->z->side * R->z->side;
  uint32_t px = tape_frozen(&R->tp, pix * R->z->wb); /* the loop's pixel_values */
  if (arch->family == VL_FAM_RESNET) {
    rel(R, x);
    uint32_t y = resnet(R, px, R->z->wb);
    rel(R, px);
    return y;
  }
  /* ViT */
  uint32_t pe = vl__tr_linear_w(
      R,
      base_param(R, arch->hidden * arch->channels * arch->patch_size * arch->patch_size * R->z->wb),
      px, R->z->wb, R->T - R->z->B, arch->channels * arch->patch_size * arch->patch_size,
      arch->hidden, true);
  rel(R, px);
  rel(R, x);
  uint32_t cat = op(R, (struct tape_op){.out_bytes = Th * r, .in = {pe}});
  rel(R, pe);
  uint32_t y = op(R, (struct tape_op){.out_bytes = Th * r, .in = {cat}, .pass = TAPE_ADD});
  rel(R, cat);
  return y;
}
