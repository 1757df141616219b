"""Tiny transformers models of the families whose exports hold CumSum (position ids from ``mask.cumsum(1)``,
BLOOM's ALiBi), built from configs with random weights (no download), and their torch.onnx exports."""
import io
import warnings

import onnx
import torch

SEQUENCE, BATCH, VOCAB, PAD = 7, 2, 50, 1
_SMALL = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
              max_position_embeddings=40, pad_token_id=PAD)
_DECODER = dict(vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=40,
                pad_token_id=PAD)


def _configs():
    import transformers as tf
    return {
        "roberta": (tf.RobertaConfig(**_SMALL), tf.RobertaModel),
        "xlm-roberta": (tf.XLMRobertaConfig(**_SMALL), tf.XLMRobertaModel),
        "camembert": (tf.CamembertConfig(**_SMALL), tf.CamembertModel),
        "data2vec-text": (tf.Data2VecTextConfig(**_SMALL), tf.Data2VecTextModel),
        "esm": (tf.EsmConfig(**dict(_SMALL, mask_token_id=2)), tf.EsmModel),
        "mpnet": (tf.MPNetConfig(**_SMALL), tf.MPNetModel),
        "ibert": (tf.IBertConfig(**_SMALL), tf.IBertModel),
        "opt": (tf.OPTConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             ffn_dim=32, max_position_embeddings=40, word_embed_proj_dim=16, pad_token_id=PAD),
                tf.OPTModel),
        "biogpt": (tf.BioGptConfig(**_SMALL), tf.BioGptModel),
        "xglm": (tf.XGLMConfig(vocab_size=VOCAB, d_model=16, num_layers=1, attention_heads=2, ffn_dim=32,
                               max_position_embeddings=40, pad_token_id=PAD), tf.XGLMModel),
        "m2m100": (tf.M2M100Config(**_DECODER), tf.M2M100Model),
        "gpt-neo": (tf.GPTNeoConfig(vocab_size=VOCAB, hidden_size=16, num_layers=2, num_heads=2,
                                    attention_types=[[["global", "local"], 1]], max_position_embeddings=40,
                                    window_size=4), tf.GPTNeoModel),
        "bloom": (tf.BloomConfig(vocab_size=VOCAB, hidden_size=16, n_layer=1, n_head=2), tf.BloomModel),
    }


FAMILIES = ("roberta", "xlm-roberta", "camembert", "data2vec-text", "esm", "mpnet", "ibert", "opt", "biogpt",
            "xglm", "m2m100", "gpt-neo", "bloom")


class _LastHidden(torch.nn.Module):
    """The model's first output (the last hidden state) from (input_ids, attention_mask); GPT-Neo's forward
    takes its position ids from the mask's cumsum, as generation passes them."""

    def __init__(self, model, encoder_decoder, positions_from_mask):
        super().__init__()
        self.model, self.encoder_decoder, self.positions_from_mask = model, encoder_decoder, positions_from_mask

    def forward(self, input_ids, attention_mask):
        extra = {"decoder_input_ids": input_ids} if self.encoder_decoder else {}
        if self.positions_from_mask:  # as transformers' generation computes them for GPT-Neo
            position_ids = attention_mask.long().cumsum(-1) - 1
            extra["position_ids"] = position_ids.masked_fill(attention_mask == 0, 1)
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False, **extra)[0]


def _inputs(sequence=SEQUENCE):
    """(input_ids, attention_mask) of `BATCH` rows, seeded: left-aligned padding in the second row."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(3, VOCAB, (BATCH, sequence), generator=generator)
    attention_mask = torch.ones(BATCH, sequence, dtype=torch.int64)
    attention_mask[1, -2:] = 0
    input_ids[1, -2:] = PAD
    return input_ids, attention_mask


def build(family):
    """(module, (input_ids, attention_mask)): the family's tiny model in eval mode, random weights, seeded."""
    config, model_class = _configs()[family]
    torch.manual_seed(0)
    module = _LastHidden(model_class(config).eval(), family == "m2m100", family == "gpt-neo").eval()
    return module, _inputs()


def export(module, example, opset, dynamic, fold=True):
    """``module`` exported by torch.onnx.export at ``opset`` (inputs input_ids, attention_mask; output y),
    with batch and sequence axes symbolic when ``dynamic``; ``fold``: torch's constant folding (which fails
    on GPT-Neo, and on I-BERT with static axes, in torch 1.10.2)."""
    axes = {name: {0: "batch", 1: "sequence"} for name in ("input_ids", "attention_mask", "y")} if dynamic else None
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(module, example, buffer, opset_version=opset, input_names=["input_ids", "attention_mask"],
                              output_names=["y"], dynamic_axes=axes, do_constant_folding=fold)
    return onnx.load_from_string(buffer.getvalue())


def _wider():
    """name -> (config, model class, how its forward is called): the heads users put on the thirteen families,
    and the other families whose exports hold CumSum (or, for MBart and its shifted decoder inputs, the ops their
    neighbours need); ``kind``: "text" (input_ids, attention_mask), "seq2seq" (decoder_input_ids = input_ids),
    "decoder-free" (an encoder-decoder given no decoder inputs), "causal" (a decoder-only head)."""
    import transformers as tf
    small, decoder = _SMALL, _DECODER
    roberta = tf.RobertaConfig(**small)
    esm = tf.EsmConfig(**dict(small, mask_token_id=2))
    opt = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32,
               max_position_embeddings=40, word_embed_proj_dim=16, pad_token_id=PAD)
    neo = dict(vocab_size=VOCAB, hidden_size=16, num_layers=2, num_heads=2,
               attention_types=[[["global", "local"], 1]], max_position_embeddings=40, window_size=4,
               pad_token_id=PAD)
    bloom = dict(vocab_size=VOCAB, hidden_size=16, n_layer=1, n_head=2, pad_token_id=PAD)
    xglm = dict(vocab_size=VOCAB, d_model=16, num_layers=1, attention_heads=2, ffn_dim=32,
                max_position_embeddings=40, pad_token_id=PAD)
    prophet = dict(vocab_size=VOCAB, hidden_size=16, encoder_ffn_dim=32, decoder_ffn_dim=32,
                   num_encoder_layers=1, num_decoder_layers=1, num_encoder_attention_heads=2,
                   num_decoder_attention_heads=2, ngram=2, num_buckets=8, relative_max_distance=16,
                   max_position_embeddings=40, pad_token_id=PAD)
    fsmt = dict(langs=["en", "de"], src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=16, encoder_layers=1,
                decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                decoder_ffn_dim=32, max_position_embeddings=40, pad_token_id=PAD)
    decoder_only = dict(vocab_size=VOCAB, d_model=16, decoder_layers=1, decoder_attention_heads=2,
                        decoder_ffn_dim=32, max_position_embeddings=40, pad_token_id=PAD)
    return {
        "roberta-sequence-classification": (roberta, tf.RobertaForSequenceClassification, "text"),
        "roberta-question-answering": (roberta, tf.RobertaForQuestionAnswering, "text"),
        "roberta-masked-lm": (roberta, tf.RobertaForMaskedLM, "text"),
        "roberta-token-classification": (roberta, tf.RobertaForTokenClassification, "text"),
        "roberta-causal-lm": (tf.RobertaConfig(**dict(small, is_decoder=True)), tf.RobertaForCausalLM, "text"),
        "xlm-roberta-sequence-classification": (tf.XLMRobertaConfig(**small),
                                                tf.XLMRobertaForSequenceClassification, "text"),
        "camembert-masked-lm": (tf.CamembertConfig(**small), tf.CamembertForMaskedLM, "text"),
        "data2vec-text-question-answering": (tf.Data2VecTextConfig(**small),
                                             tf.Data2VecTextForQuestionAnswering, "text"),
        "esm-masked-lm": (esm, tf.EsmForMaskedLM, "text"),
        "esm-sequence-classification": (esm, tf.EsmForSequenceClassification, "text"),
        "esm-rotary": (tf.EsmConfig(**dict(small, mask_token_id=2, position_embedding_type="rotary")),
                       tf.EsmModel, "text"),
        "mpnet-masked-lm": (tf.MPNetConfig(**small), tf.MPNetForMaskedLM, "text"),
        "mpnet-sequence-classification": (tf.MPNetConfig(**small), tf.MPNetForSequenceClassification, "text"),
        "ibert-sequence-classification": (tf.IBertConfig(**small), tf.IBertForSequenceClassification, "text"),
        "opt-causal-lm": (tf.OPTConfig(**opt), tf.OPTForCausalLM, "text"),
        "opt-sequence-classification": (tf.OPTConfig(**opt), tf.OPTForSequenceClassification, "text"),
        "biogpt-causal-lm": (tf.BioGptConfig(**small), tf.BioGptForCausalLM, "text"),
        "xglm-causal-lm": (tf.XGLMConfig(**xglm), tf.XGLMForCausalLM, "text"),
        "m2m100-generation": (tf.M2M100Config(**decoder), tf.M2M100ForConditionalGeneration, "seq2seq"),
        "gpt-neo-causal-lm": (tf.GPTNeoConfig(**neo), tf.GPTNeoForCausalLM, "causal"),
        "gpt-neo-sequence-classification": (tf.GPTNeoConfig(**neo), tf.GPTNeoForSequenceClassification, "causal"),
        "bloom-causal-lm": (tf.BloomConfig(**bloom), tf.BloomForCausalLM, "text"),
        "bloom-sequence-classification": (tf.BloomConfig(**bloom), tf.BloomForSequenceClassification, "text"),
        "bloom-token-classification": (tf.BloomConfig(**bloom), tf.BloomForTokenClassification, "text"),
        "xlm-roberta-xl": (tf.XLMRobertaXLConfig(**small), tf.XLMRobertaXLModel, "text"),
        "roberta-prelayernorm": (tf.RobertaPreLayerNormConfig(**small), tf.RobertaPreLayerNormModel, "text"),
        "luke": (tf.LukeConfig(**dict(small, entity_vocab_size=10, entity_emb_size=8)), tf.LukeModel, "text"),
        # LiLT's layout embeddings split the hidden size six ways
        "lilt": (tf.LiltConfig(**dict(small, hidden_size=24)), tf.LiltModel, "text"),
        "markuplm": (tf.MarkupLMConfig(**small), tf.MarkupLMModel, "text"),
        "fsmt": (tf.FSMTConfig(**fsmt), tf.FSMTModel, "seq2seq"),
        "prophetnet": (tf.ProphetNetConfig(**prophet), tf.ProphetNetModel, "seq2seq"),
        "xlm-prophetnet": (tf.XLMProphetNetConfig(**prophet), tf.XLMProphetNetModel, "seq2seq"),
        "trocr-causal-lm": (tf.TrOCRConfig(**dict(decoder_only, cross_attention_hidden_size=16)),
                            tf.TrOCRForCausalLM, "text"),
        "speech-to-text-2-causal-lm": (tf.Speech2Text2Config(**decoder_only), tf.Speech2Text2ForCausalLM, "text"),
        "mbart-generation": (tf.MBartConfig(**decoder), tf.MBartForConditionalGeneration, "decoder-free"),
    }


class _FirstOutput(torch.nn.Module):
    """The model's first output from (input_ids, attention_mask), called as ``kind`` says (see `_wider`)."""

    def __init__(self, model, kind):
        super().__init__()
        self.model, self.kind = model, kind

    def forward(self, input_ids, attention_mask):
        extra = {"decoder_input_ids": input_ids} if self.kind == "seq2seq" else {}
        if self.kind == "causal":  # position ids from the mask's cumsum, as transformers' generation passes them
            position_ids = attention_mask.long().cumsum(-1) - 1
            extra["position_ids"] = position_ids.masked_fill(attention_mask == 0, 1)
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False, **extra)[0]


#: the wider sweep's models (tests/onnx_model_sweep.py --wider), in the order of `_wider`
WIDER = ("roberta-sequence-classification", "roberta-question-answering", "roberta-masked-lm",
         "roberta-token-classification", "roberta-causal-lm", "xlm-roberta-sequence-classification",
         "camembert-masked-lm", "data2vec-text-question-answering", "esm-masked-lm", "esm-sequence-classification",
         "esm-rotary", "mpnet-masked-lm", "mpnet-sequence-classification", "ibert-sequence-classification",
         "opt-causal-lm", "opt-sequence-classification", "biogpt-causal-lm", "xglm-causal-lm", "m2m100-generation",
         "gpt-neo-causal-lm", "gpt-neo-sequence-classification", "bloom-causal-lm", "bloom-sequence-classification",
         "bloom-token-classification", "xlm-roberta-xl", "roberta-prelayernorm", "luke", "lilt", "markuplm", "fsmt",
         "prophetnet", "xlm-prophetnet", "trocr-causal-lm", "speech-to-text-2-causal-lm", "mbart-generation")


def build_wider(name):
    """(module, (input_ids, attention_mask)) for one of `WIDER`, as `build` makes the thirteen."""
    config, model_class, kind = _wider()[name]
    torch.manual_seed(0)
    module = _FirstOutput(model_class(config).eval(), kind).eval()
    return module, _inputs()


def deep_encoder(layers, hidden, heads, sequence=SEQUENCE):
    """(module, (input_ids, attention_mask)): a RoBERTa encoder of ``layers`` layers of width ``hidden`` (feed-forward
    4 x ``hidden``, as BERT-base's 12 x 768 with 12 heads), random weights, seeded; its position ids are the mask's
    cumsum, as in the thirteen families."""
    import transformers as tf
    config = tf.RobertaConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                              intermediate_size=4 * hidden, max_position_embeddings=sequence + 4, pad_token_id=PAD)
    torch.manual_seed(0)
    module = _LastHidden(tf.RobertaModel(config).eval(), False, False).eval()
    return module, _inputs(sequence)



def _einsum_configs():
    """name -> (config, model class): models whose exports hold Einsum of many kinds (XLNet's relative attention,
    Funnel's pooled attention). Funnel keeps its last position when it pools (``truncate_seq=False``: the import
    refuses the Slice of step 2 that drops it from a sequence whose length is computed) and has no pad id
    (transformers 4.26.1's weight initialisation fails on one)."""
    import transformers as tf
    xlnet = tf.XLNetConfig(vocab_size=VOCAB, d_model=16, n_layer=1, n_head=2, d_inner=32, pad_token_id=PAD)
    funnel = tf.FunnelConfig(vocab_size=VOCAB, d_model=16, n_head=2, d_head=8, d_inner=32, block_sizes=[1, 1],
                             num_decoder_layers=1, truncate_seq=False)
    return {"xlnet": (xlnet, tf.XLNetModel), "funnel": (funnel, tf.FunnelModel)}


def build_einsum(name):
    """(module, (input_ids, attention_mask)) for "xlnet" or "funnel" (`_einsum_configs`), as `build` makes the
    thirteen."""
    config, model_class = _einsum_configs()[name]
    torch.manual_seed(0)
    module = _FirstOutput(model_class(config).eval(), "text").eval()
    return module, _inputs()
