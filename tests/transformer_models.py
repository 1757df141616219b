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


def build(family):
    """(module, (input_ids, attention_mask)): the family's tiny model in eval mode, random weights, seeded."""
    config, model_class = _configs()[family]
    torch.manual_seed(0)
    module = _LastHidden(model_class(config).eval(), family == "m2m100", family == "gpt-neo").eval()
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(3, VOCAB, (BATCH, SEQUENCE), generator=generator)
    attention_mask = torch.ones(BATCH, SEQUENCE, dtype=torch.int64)
    attention_mask[1, -2:] = 0  # left-aligned padding in the second row
    input_ids[1, -2:] = PAD
    return module, (input_ids, attention_mask)


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
