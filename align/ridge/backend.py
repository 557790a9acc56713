"""Where the fit's products and solves run: numpy on the host, or torch on a device, through
one code path (`Backend`). Arrays enter as numpy and leave as numpy; in between they are
float64 on the device."""

from __future__ import annotations

import numpy as np


class Backend:
    """Where the products and solves run: "cpu" (numpy) or a torch device such as "cuda".

    Arrays enter as numpy (any float dtype) through `put` and leave as numpy through `get`; in
    between they live on the device, in float64.

    Parameters
    ----------
    device : str, optional
        "cpu", or a torch device.
    use_torch : bool, optional
        True runs torch on "cpu" too: the GPU's code path, testable without one (None: torch
        on any device but "cpu").
    """

    def __init__(self, device: str = "cpu", use_torch: bool | None = None):
        self.device = device
        self.torch = None
        if use_torch or (use_torch is None and device != "cpu"):
            import torch  # lazily: ~1.5 s to import, and a numpy fit never needs it

            self.torch = torch
            self.dev = torch.device(device)

    def put(self, a):
        """numpy (any float dtype) -> float64 array on the device.

        Parameters
        ----------
        a : array
            Any float dtype.

        Returns
        -------
        array or torch.Tensor
            float64, on the device.
        """
        if self.torch is None:
            return np.asarray(a, dtype=np.float64)
        if isinstance(a, self.torch.Tensor):
            return a.to(self.dev, self.torch.float64)
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.dev).to(self.torch.float64)

    def get(self, a) -> np.ndarray:
        if self.torch is None:
            return a
        return a.detach().cpu().numpy()

    def zeros(self, shape):
        if self.torch is None:
            return np.zeros(shape)
        return self.torch.zeros(shape, dtype=self.torch.float64, device=self.dev)

    def empty(self, shape):
        """float64 of `shape`, uninitialised.

        Parameters
        ----------
        shape : tuple of int
            The shape.

        Returns
        -------
        array or torch.Tensor
            On the device.
        """
        if self.torch is None:
            return np.empty(shape)
        return self.torch.empty(shape, dtype=self.torch.float64, device=self.dev)

    def mask(self, m: np.ndarray):
        if self.torch is None:
            return m
        return self.torch.from_numpy(np.ascontiguousarray(m)).to(self.dev)

    def sum0(self, a):
        return a.sum(0)

    @property
    def on_cpu(self) -> bool:
        """The arrays live in host memory (numpy, or torch on "cpu").

        Returns
        -------
        bool
            True on the host.
        """
        return self.torch is None or self.dev.type == "cpu"

    def _squares(self, spec: str, a):
        """einsum(spec, a, a) through numpy on the host (no temporary of a's size: on the CPU
        twice as fast as torch's product-then-sum), None on a GPU."""
        if not self.on_cpu:
            return None
        if self.torch is None:
            return np.einsum(spec, a, a)
        v = a.numpy()
        return self.torch.from_numpy(np.einsum(spec, v, v))

    def sumsq0(self, a):
        """Σ_n a[n, k]² per column.

        Parameters
        ----------
        a : array of shape (n_tokens, d)
            Rows on the device.

        Returns
        -------
        array of shape (d,)
            On the device.
        """
        out = self._squares("nd,nd->d", a)
        return out if out is not None else (a * a).sum(0)

    def rownorm(self, a):
        """‖row‖₂ of each row.

        Parameters
        ----------
        a : array of shape (n_tokens, d)
            Rows on the device.

        Returns
        -------
        array of shape (n_tokens,)
            On the device.
        """
        if self.torch is None:
            return np.sqrt(np.einsum("nd,nd->n", a, a))
        return self.torch.linalg.vector_norm(a, dim=1)

    def blocknorm2(self, a, n_blocks: int):
        """‖row block‖² of each row cut into n_blocks blocks of d.

        Parameters
        ----------
        a : array of shape (n_tokens, n_blocks·d)
            Rows on the device.
        n_blocks : int
            Blocks a row is cut into.

        Returns
        -------
        array of shape (n_tokens, n_blocks)
            On the device.
        """
        v = a.reshape(a.shape[0], n_blocks, -1)
        out = self._squares("rjd,rjd->rj", v)
        return out if out is not None else (v * v).sum(2)

    def maximum(self, a, floor: float):
        if self.torch is None:
            return np.maximum(a, floor)
        return self.torch.clamp(a, min=floor)

    def eigh(self, C):
        """C = Q diag(λ) Qᵀ for a symmetric C.

        Parameters
        ----------
        C : array of shape (d, d)
            Symmetric, on the device.

        Returns
        -------
        lam : array of shape (d,)
            λ, ascending.
        Q : array of shape (d, d)
            The eigenvectors, as columns.
        """
        if self.torch is None:
            return np.linalg.eigh(C)
        return self.torch.linalg.eigh(C)

    def add_product(self, acc, A, B, fresh: bool = False) -> None:
        """acc += Aᵀ B in place, with no temporary of acc's size.

        All float64 on the device; at (ΣD_S, ΣD_T) a temporary would be ~100 MB a product. On
        numpy: `fresh` (acc still holds zeros) writes the product straight into acc through numpy's
        matmul; otherwise BLAS dgemm with β = 1 on C-contiguous operands. numpy's matmul releases
        the GIL and scipy's dgemm does not (two threads took twice as long as one), so the first
        product of every task, all of a small fit's, runs in parallel in the threads of one
        process.

        Parameters
        ----------
        acc : array of shape (p, q)
            The accumulator.
        A : array of shape (n_tokens, p)
            Left rows.
        B : array of shape (n_tokens, q)
            Right rows.
        fresh : bool, optional
            acc still holds zeros.
        """
        if self.torch is not None:
            acc.addmm_(A.T, B)
            return
        if not len(A):
            return
        if fresh and acc.flags.c_contiguous:
            np.matmul(A.T, B, out=acc)
            return
        if acc.flags.c_contiguous and A.flags.c_contiguous and B.flags.c_contiguous:
            # in Fortran order acc is accᵀ (q, p): accᵀ += Bᵀ A, with Bᵀ and Aᵀ Fortran views
            out = _dgemm()(1.0, B.T, A.T, beta=1.0, c=acc.T, trans_b=1, overwrite_c=1)
            if not np.shares_memory(out, acc):
                acc[...] = out.T
            return
        acc += A.T @ B


def _dgemm():
    from scipy.linalg.blas import dgemm  # lazily: only the host's in-place product needs scipy

    return dgemm


CPU = Backend("cpu")
