/* diffattn's model configuration: the attention variant and the fields of a
 * model (types only; model.h has the functions over them). */
#ifndef DIFFATTN_CONFIG_H
#define DIFFATTN_CONFIG_H

#ifdef __cplusplus
extern "C" {
#endif

/* The attention variant: the one enum of attention kinds. Each is a module
 * of src/attn/ (its entry of the variant table, attn/variant.h); the CLI and
 * the checkpoint metadata spell them diff, softmax, diff2, nsa, moba.
 * DIFF: the Differential Transformer (V1); SOFTMAX: the baseline; DIFF2: DIFF V2
 * (microsoft/unilm Diff-Transformer-V2/multihead_flashdiffv2.py): 2H query
 * heads of size d = dim/H, K and V shared by the two maps of a head, lambda
 * per token and head = sigmoid(x . lambda_proj), no head norm. NSA: Native
 * Sparse Attention (DeepSeek 2025, arXiv 2502.11089), softmax's heads over
 * three gated branches (compressed blocks, selected blocks, a window). MOBA:
 * Mixture of Block Attention (Kimi 2025, arXiv 2502.13189), softmax's heads and
 * tensors, each query attending to its own block and its top-scoring earlier ones. GDA: grouped
 * differential attention (arXiv 2510.06949): n_heads signal heads in gda_noise_heads groups, each
 * group's one noise map subtracted from its signal heads' maps; DIFF V1 when every group has one
 * signal head (src/attn/gda.c). */
typedef enum {
    DA_ARCH_DIFF = 0,
    DA_ARCH_SOFTMAX = 1,
    DA_ARCH_DIFF2 = 2,
    DA_ARCH_NSA = 3,
    DA_ARCH_MOBA = 4,
    DA_ARCH_GDA = 5,
    DA_ARCH_N
} da_arch;

/* RoPE frequencies of pair j of a d-wide sub-head. DIFF: the official DIFF
 * framework's theta^(-j/(d/2-1)); LLAMA: theta^(-2j/d) (Llama, Hugging Face). */
typedef enum { DA_ROPE_FREQ_DIFF = 0, DA_ROPE_FREQ_LLAMA = 1 } da_rope_freq;
/* Hugging Face rope_scaling: none; linear (every frequency / factor); llama3
 * (low frequencies / factor, high ones kept, a smooth ramp between). */
typedef enum { DA_ROPE_SCALE_NONE = 0, DA_ROPE_SCALE_LINEAR = 1, DA_ROPE_SCALE_LLAMA3 = 2 } da_rope_scale;

/* The MLP's gate between w1/w3 and w2: SwiGLU, silu(h1) * h3; or PolyNorm (arXiv 2411.03884),
 * PolyNorm(h1) * h3 with PolyNorm's three weights and bias per layer. */
typedef enum { DA_MLP_SWIGLU = 0, DA_MLP_POLYNORM = 1 } da_mlp;

/* The per-head norm of the attention output (the paper's GroupNorm, Table 6's
 * ablations): DEFAULT is the variant's own (DIFF on, softmax off; DIFF2 has
 * none and refuses the others). */
typedef enum { DA_HEAD_NORM_DEFAULT = 0, DA_HEAD_NORM_ON = 1, DA_HEAD_NORM_OFF = 2 } da_head_norm;

/* Attention tensors per layer, at most (da_layer_weights.attn). */
#define DA_ATTN_MAX_TENSORS 16

typedef struct {
    da_arch arch;
    int dim;
    int n_layers;
    int n_heads;    /* DIFF: differential heads; softmax: plain heads (twice DIFF's at equal params);
                     * DIFF2: output heads, each with two query heads of the same size */
    int n_kv_heads; /* GQA: n_heads / n_kv_heads query heads share one KV group */
    int vocab_size;
    int ffn_hidden;
    int max_seq_len;
    float norm_eps;
    float rope_theta;
    int tie_embeddings; /* 1: output.weight is tok_embeddings.weight */
    int window;         /* sliding-window attention: query t sees keys t-window+1 .. t (both maps of
                         * DIFF and DIFF2); 0 = every earlier key. Stored only when > 0 */
    da_rope_freq rope_freq;   /* default DIFF; models loaded from Hugging Face use LLAMA */
    da_rope_scale rope_scaling;
    float rope_factor;            /* linear, llama3 */
    float rope_low_freq_factor;   /* llama3 */
    float rope_high_freq_factor;  /* llama3 */
    int rope_original_max_pos;    /* llama3: original_max_position_embeddings */
    da_head_norm head_norm; /* DIFF off: no subln and no (1 - lambda_init) factor; softmax on: an RMSNorm per
                             * head with one d-wide gain (attn.subln.weight) shared by the heads, no scale */
    int head_dim;           /* d, the width of a query/key (sub-)head, as Hugging Face's head_dim; 0 = the
                             * default dim / (n_heads * sub-heads per head). Set, q, k, v and the output
                             * projection's input are n_heads * d (and so on) wide rather than dim */
    float lambda_hold;      /* DIFF, DIFF2: the share of the second map's weight held back, in [0, 1]: the
                             * weight is (1 - lambda_hold) * lambda; 0 = the variant's own (and what a
                             * zeroed config means). A ramp's state (--lambda-ramp), stored so a converted
                             * model computes its source's logits until trained */
    float lambda_init;      /* DIFF: lambda_init of every layer, in (0, 1); 0 = the depth schedule
                             * 0.8 - 0.6 exp(-0.3 l) (da_config_lambda_init) */
    /* NSA's hyper-parameters (docs/model.md), stored for NSA only: l, the length of a
     * compression block; s, their stride; l', the length of a selection block; n, the
     * selection blocks per query (the three forced ones included); w, the window branch */
    int nsa_block, nsa_stride, nsa_select, nsa_topn, nsa_window;
    int nsa_shared_kv; /* NSA: 1 = one K/V projection for the three branches (k_proj, v_proj); 0 = a pair each */
    /* MoBA's (docs/model.md), stored for MoBA only: B, the block length; k, the blocks
     * a query attends to, its own included */
    int moba_block, moba_topk;
    /* GDA's (docs/model.md), stored for GDA only: G, the noise heads (groups); 0 = n_heads, one
     * noise head per signal head (DIFF V1) */
    int gda_noise_heads;
    da_mlp mlp; /* the MLP's gate; SwiGLU unless set (stored only when set) */
} da_config;

#ifdef __cplusplus
}
#endif
#endif
