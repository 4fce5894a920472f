"""The Gram matrices of a whitened Jacobian's weight groups, from which the
evidence's kernel ``I + sum_g W_g W_g^T / (delta_g c**2)`` is summed.

A group that is a parameter tensor keeps its ``M x M`` Gram matrix
``W_g W_g^T``. A weight matrix that reads the network's inputs
(``ParameterGroups.input_layers``) keeps one for all its input columns, tied
or apart: the Jacobian of weight ``(h, j)`` at observation ``m`` is
``U_mh x_mj``, with ``U`` the Jacobian of the layer's outputs and ``x_m`` the
input the observation's row feeds it, so column ``j``'s Gram matrix is
``(U U^T) o (x_j x_j^T)`` (``o`` the element-wise product) and the columns'
sum is ``(U U^T) o (X diag(1 / delta) X^T)``. The layer thus takes one matrix
and ``M^2 (H + D)`` operations, not ``M^2 H D``.
"""

import torch


class KernelGrams:
    """The groups' Gram matrices of ``factor``, summed into kernels and traced against a matrix.

    Parameters
    ----------
    factor : tensor of shape (M, K)
        The whitened Jacobian, one row per observation (row-major: a data row's outputs together).
    inputs : tensor of shape (N, D)
        The network's inputs, ``M / N`` observations a row.
    groups : ParameterGroups
    """

    def __init__(self, factor, inputs, groups):
        n_observations = factor.shape[0]
        inputs = inputs.to(factor).repeat_interleave(n_observations // inputs.shape[0], dim=0)
        layers = groups.input_layers()
        self._n_groups = len(groups)
        tensor_groups = torch.tensor(sorted(set(range(len(groups))) - _layer_groups(layers)), dtype=torch.long)
        self._tensor_groups = tensor_groups.to(factor.device)
        self._layers = [(columns.to(factor.device), self._layer_gram(factor[:, weights], inputs, len(columns)))
                        for weights, columns in layers]
        self._inputs = inputs
        blocks = groups.split(factor, tensor_groups)
        self._grams = factor.new_empty(len(blocks), n_observations, n_observations)
        for gram, block in zip(self._grams, blocks):
            torch.matmul(block, block.T, out=gram)

    @staticmethod
    def count(groups):
        """How many ``M x M`` matrices the Gram matrices of ``groups`` take."""
        layers = groups.input_layers()
        return len(groups) - len(_layer_groups(layers)) + len(layers)

    @staticmethod
    def _layer_gram(block, inputs, n_columns):
        """``U U^T`` of a layer from its weights' Jacobian ``block`` ``(M, H D)``: ``U_mh`` is
        ``sum_j W_m(h,j) x_mj / ||x_m||^2`` (0 for an input of zeros, whose Jacobian is 0)."""
        block = block.reshape(block.shape[0], -1, n_columns)
        norms = inputs.square().sum(1, keepdim=True)
        outputs = torch.einsum("mhj,mj->mh", block, inputs) / torch.where(norms > 0, norms, 1.0)
        return outputs @ outputs.T

    def kernel(self, scales):
        """``sum_g scales_g W_g W_g^T``, ``scales`` one per group ``(G,)``."""
        kernel = torch.einsum("g,gij->ij", scales[self._tensor_groups], self._grams)
        for columns, gram in self._layers:
            kernel += gram * ((self._inputs * scales[columns]) @ self._inputs.T)
        return kernel

    def traces(self, matrix):
        """``tr(W_g W_g^T matrix)`` of each group, ``(G,)``, for a symmetric ``matrix``."""
        traces = matrix.new_zeros(self._n_groups)
        traces[self._tensor_groups] = self._grams.flatten(1) @ matrix.flatten()
        for columns, gram in self._layers:
            traces.index_add_(0, columns, (self._inputs * ((gram * matrix) @ self._inputs)).sum(0))
        return traces


def _layer_groups(layers):
    """The groups of the input layers' columns, a set."""
    return {int(group) for _, columns in layers for group in columns}
