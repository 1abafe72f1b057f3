"""The scikit-learn estimators: scikit-learn's own checks, and a real fit."""
import warnings
from unittest import SkipTest

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import roc_auc_score
from sklearn.utils.estimator_checks import check_estimator

from fsgd.sklearn import EXPECTED_FAILED_CHECKS, FsgdClassifier, FsgdRegressor

try:  # scikit-learn 1.6 and later (generate_only is gone)
    from sklearn.utils.estimator_checks import estimator_checks_generator

    def _generate(est):
        return estimator_checks_generator(est, legacy=True, expected_failed_checks=EXPECTED_FAILED_CHECKS,
                                          mark="skip")
except ImportError:  # Debian bookworm's 1.2
    def _generate(est):
        return check_estimator(est, generate_only=True)


def _checks():
    for est in (FsgdClassifier(), FsgdClassifier("svm"), FsgdRegressor()):
        for e, check in _generate(est):
            name = getattr(check, "func", check).__name__
            yield pytest.param(e, check, id=f"{type(est).__name__}-{getattr(est, 'loss', 'linear')}-{name}")


@pytest.mark.parametrize("est,check", list(_checks()))
def test_check_estimator(est, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            check(est)
        except SkipTest as e:  # scikit-learn's own reason (pandas missing, ...)
            pytest.skip(str(e))


def test_classifier_on_a9a(a9a):
    X, y = load_svmlight_file(str(a9a[0]), zero_based=False, n_features=123)
    Xt, yt = load_svmlight_file(str(a9a[1]), zero_based=False, n_features=123)
    clf = FsgdClassifier(seed=3).fit(X, y)
    assert list(clf.classes_) == [-1.0, 1.0]
    assert roc_auc_score(yt, clf.predict_proba(Xt)[:, 1]) > 0.895
    assert clf.score(Xt, yt) > 0.84
    assert clf.get_params()["seed"] == 3
    assert clf.set_params(epochs=2).get_params()["epochs"] == 2
    np.testing.assert_array_equal(clf.predict(Xt[:10]), np.where(clf.decision_function(Xt[:10]) > 0, 1.0, -1.0))


def test_fit_trains_on_every_row(a9a):
    # issue 40 item 4: fit held 20% of X out as fsgd train's test set
    X, y = load_svmlight_file(str(a9a[0]), n_features=123)
    clf = FsgdClassifier(epochs=1).fit(X, y)
    m = clf.models_[0].metrics
    assert m["train_rows"] == X.shape[0] and m["test"]["n"] == 0, (m["train_rows"], m["test"]["n"])


def test_ftrl_l1_and_max_epochs(a9a):
    # issue 40 item 14: FTRL, L1 and max_epochs could not be set from the estimators
    X, y = load_svmlight_file(str(a9a[0]), n_features=123)
    clf = FsgdClassifier(optimizer="ftrl", l1=1e-3, max_epochs=2).fit(X, y)
    m = clf.models_[0].metrics
    assert m["optimizer"] == "ftrl" and m["l1"] == 1e-3, (m["optimizer"], m["l1"])
    assert m["weights_nonzero"] < m["weights_touched"], m
    assert m["epochs_run"] <= 2, m["epochs_run"]
    assert FsgdRegressor(max_epochs=1).fit(X, y).models_[0].metrics["epochs_run"] <= 1
