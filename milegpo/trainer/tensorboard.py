"""TensorBoard logs of a MileGPO run (``report_to="tensorboard"``): transformers' ``TensorBoardCallback`` with the
metrics that have no value in an iteration left out instead of warned about.

GRPOTrainer logs ``None`` for a metric none of whose values in the logging window is a number (TRL's
convention: a credit diagnostic that is n/a, e.g. ``credit/tie_correction_rate`` in an iteration without ties,
is NaN, and a window of NaNs logs ``None``). TensorBoard has no such scalar, so transformers' callback drops
it with a warning, one per metric and iteration. :class:`TensorBoardScalars` leaves it out without one: the
curve has a gap at that step, and ``trainer.state.log_history`` (``metrics.jsonl`` of ``milegpo train``)
keeps the ``None``. Every other value is written as transformers writes it (scalars under ``train/`` and
``eval/``, in ``<output_dir>/runs/<date>_<host>`` or ``$TENSORBOARD_LOGGING_DIR``).
"""

from __future__ import annotations

from transformers.integrations import TensorBoardCallback


class TensorBoardScalars(TensorBoardCallback):
    """``TensorBoardCallback`` that writes no scalar for a metric logged as ``None`` (n/a in that window)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = {k: v for k, v in (logs or {}).items() if v is not None}
        return super().on_log(args, state, control, logs=logs, **kwargs)


def use_tensorboard_scalars(callback_handler) -> bool:
    """Replace transformers' ``TensorBoardCallback`` in ``callback_handler`` (a Trainer's) by
    :class:`TensorBoardScalars`, at the same place; True if there was one (``report_to`` names tensorboard)."""
    callbacks = callback_handler.callbacks
    for i, callback in enumerate(callbacks):
        if type(callback) is TensorBoardCallback:
            replacement = TensorBoardScalars(tb_writer=callback.tb_writer)
            replacement.logging_dir = callback.logging_dir
            callbacks[i] = replacement
            return True
    return False


__all__ = ["TensorBoardScalars", "use_tensorboard_scalars"]
