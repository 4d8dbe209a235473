"""Target prefixes: forced decoding of a given start of the translation.

A sentence with a prefix y_1 ... y_P decodes its first P tokens as given, then continues as its
search (greedy, beam or sampling) would: at output position t < P every token but y_t gets
log-probability -inf, and y_t keeps the model's own log P(y_t | y_<t, X). So the output starts
with the prefix, its score counts the prefix tokens (log P(Y | X) of the whole output, what a
teacher-forced forward assigns it), and the search is otherwise unchanged; in beam search the
K beams stay one until the prefix ends. Uses: interactive completion (a translator types the
start, the model proposes the rest), constrained outputs, checking what the model does after a
given start.

A sentence's maximum output length is raised, when needed, to its prefix plus one token (so
that eos can follow), within the model's `max_positions`; a prefix of `max_positions` tokens
or more is refused where users' prefixes come in (`Translator`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

NO_TOKEN = -1  # marks "not forced" in the prefix table


class PrefixForcing:
    """Forces each row's first tokens; rows follow the search's reordering.

    Args:
        prefixes: Token ids to force at the start of each row's output (empty: none).
        device: Where the searched tensors are.

    Shape:
        prefixes: R lists of ids. `self.tokens`: (R, P), P the longest prefix, `NO_TOKEN`
        after the end of each row's prefix.
    """

    def __init__(self, prefixes: Sequence[Sequence[int]], device: torch.device) -> None:
        longest = max((len(p) for p in prefixes), default=0)
        self.tokens = torch.full((len(prefixes), longest), NO_TOKEN, dtype=torch.long)
        for row, prefix in enumerate(prefixes):
            self.tokens[row, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.long)
        self.tokens = self.tokens.to(device)

    def apply(self, log_probs: torch.Tensor, step: int) -> torch.Tensor:
        """Keep only the forced token of each row whose prefix covers output position `step`.

        Args:
            log_probs: Next-token log-probabilities of every row.
            step: 0-based position of the token being chosen.

        Returns:
            `log_probs` with every other token of forced rows at -inf (the forced one keeps
            its value); unchanged rows and, past every prefix, the same tensor.

        Shape:
            log_probs: (R, V). output: (R, V).
        """
        if step >= self.tokens.shape[1]:
            return log_probs
        forced = self.tokens[:, step]  # (R, P) -> (R,)
        active = forced.ne(NO_TOKEN)
        if not bool(active.any()):
            return log_probs
        index = forced.clamp(min=0).unsqueeze(1)  # (R,) -> (R, 1)
        kept = log_probs.gather(1, index)  # (R, V) -> (R, 1)
        only = torch.full_like(log_probs, float("-inf")).scatter_(1, index, kept)  # (R, V)
        return torch.where(active.unsqueeze(1), only, log_probs)  # (R, 1) broadcast to (R, V)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep, reorder or repeat rows, as the decoder cache does.

        Shape:
            index: (R',) long; the table goes from (R, P) to (R', P).
        """
        self.tokens = self.tokens.index_select(0, index)


def prefix_lengths(max_lens: list[int], prefixes: Sequence[Sequence[int]], cap: int) -> list[int]:
    """Each sentence's maximum output length, raised to its prefix + 1 (at most `cap`).

    Args:
        max_lens: The maximum from a * S + b (`search.max_output_lengths`).
        prefixes: One prefix per sentence.
        cap: `max_positions` of the model.

    Returns:
        max(max_len, min(len(prefix) + 1, cap)) for each sentence.
    """
    pairs = zip(max_lens, prefixes, strict=True)
    return [max(limit, min(len(prefix) + 1, cap)) for limit, prefix in pairs]
