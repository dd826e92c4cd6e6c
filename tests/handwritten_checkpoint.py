"""A hand-written checkpoint for the tests of the checkpointing exercises (lesson 09's and the
beyond-autocast labs'): its recompute re-enters autocast as the test says, given the forward's
state, so that each way of losing or replaying that state can be planted."""

import torch


def recompute_in(enter_autocast):
    """``checkpointed(block, x)``: block(x) without keeping its activations, recomputed in
    backward under ``enter_autocast(enabled, dtype, grad_dtype)``: the forward's CPU autocast
    state and the dtype of the gradient that reached the block's output."""

    def checkpointed(block, x):
        enabled, dtype = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")

        class Recompute(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                with torch.no_grad():
                    return block(x)

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                x = x.detach().requires_grad_()
                with torch.enable_grad(), enter_autocast(enabled, dtype, grad.dtype):
                    out = block(x)
                torch.autograd.backward(out, grad)
                return x.grad

        return Recompute.apply(x)

    return checkpointed
