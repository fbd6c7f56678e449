"""CreditConfig (spec section 8): its checks, the presets and the names of methods and variants."""

import pytest

from milegpo.credit import VARIANTS, CreditConfig, presets


def test_config_errors_and_presets():
    assert presets.ALFWORLD.norm == "mean_std" and presets.WEBSHOP.norm == "mean"
    assert presets.WEBSHOP.eta == 1.0 and presets.WEBSHOP.kappa_bc == 1 and presets.WEBSHOP.rho == 0.5
    assert presets.ALFWORLD.theta_m == 1.1 and presets.ALFWORLD.eta == 0.2
    with pytest.raises(ValueError, match=r"unknown CreditConfig field\(s\) \['etaa'\]"):
        presets.ALFWORLD.replace(etaa=0.1)
    with pytest.raises(ValueError, match="omega must be in"):
        CreditConfig(omega=1.5)
    with pytest.raises(ValueError, match="norm must be one of"):
        CreditConfig(norm="std")
    with pytest.raises(ValueError, match="kappa_bc must be 0 or 1"):
        CreditConfig(kappa_bc=2)
    with pytest.raises(ValueError, match="min_node_support must be a whole number >= 1"):
        CreditConfig(min_node_support=0)
    with pytest.raises(TypeError, match="eta must be a number"):
        CreditConfig(eta="0.2")
    with pytest.raises(ValueError, match="c must be finite"):
        CreditConfig(c=float("nan"))
    with pytest.raises(TypeError):
        CreditConfig(unknown=1)


def test_variants_are_the_kernels_variants():
    from milegpo.credit import config
    from milegpo_kernels import scoring

    # one definition: the variants graph_scores computes are the ones estimate accepts
    assert VARIANTS is scoring.VARIANTS is config.VARIANTS and VARIANTS == ("md", "rcs", "full")
