"""scikit-learn estimators on fsgd.train: FsgdClassifier (logistic
regression or linear SVM; more than two classes one-vs-rest) and
FsgdRegressor (linear regression). Parameters are fsgd train's options,
with its defaults ("auto": the data decide, `fsgd train --help`). X goes to
the library as CSR arrays (fsgd/api.h), never as text."""
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_array, check_is_fitted, check_X_y

from . import train as _train

# scikit-learn 1.6 and later check that a sample weight of k is the same
# model as the row k times (and 0 as no row): not so for SGD, whose steps
# see a weighted row once and a repeated row in k places (and l2 and lr auto
# count rows); scikit-learn's own SGDClassifier expects the same two checks
# to fail. For check_estimator(est, expected_failed_checks=...).
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": "SGD: a weighted row is not the row repeated",
    "check_sample_weight_equivalence_on_sparse_data": "SGD: a weighted row is not the row repeated",
}

def _fit_one(est, X, y, model, sample_weight=None, class_weight=None):
    # test_fraction=0: fit trains on every row it is given (fsgd train without
    # --test would hold 20% out as its test set; issue 40 item 4)
    # lr "auto" is the default, left out: with optimizer ftrl an lr given is refused (FTRL takes alpha)
    return _train(X, y, sample_weight=sample_weight, class_weight=class_weight, model=model, epochs=est.epochs,
                  lr=None if est.lr == "auto" else est.lr, l2=est.l2, batch=est.batch, seed=est.seed,
                  codec=est.codec, threads=est.threads, bias=est.fit_intercept, test_fraction=0,
                  optimizer=est.optimizer, l1=est.l1, max_epochs=est.max_epochs)


class _FsgdBase(BaseEstimator):
    """optimizer "adam" or "ftrl" (FTRL-Proximal; l1 > 0 needs it: exact
    zeros), max_epochs: the most epochs when epochs is "auto"; threads: None
    for fsgd train's default (every core; a step too small to split runs on
    fewer), a number otherwise."""

    def __init__(self, *, epochs="auto", lr="auto", l2="auto", batch=256, seed=1, codec="none", threads=None,
                 fit_intercept=True, optimizer="adam", l1=0.0, max_epochs=50):
        self.optimizer = optimizer
        self.l1 = l1
        self.max_epochs = max_epochs
        self.epochs = epochs
        self.lr = lr
        self.l2 = l2
        self.batch = batch
        self.seed = seed
        self.codec = codec
        self.threads = threads
        self.fit_intercept = fit_intercept

    def _check_X(self, X):
        check_is_fitted(self, "models_")
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        return X

    def _margins(self, X):
        X = self._check_X(X)
        return np.column_stack([m.decision_function(X) for m in self.models_])

    # scikit-learn < 1.6 reads _more_tags, 1.6 and later __sklearn_tags__
    def _more_tags(self):
        return {"poor_score": True}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR is what the library trains on
        return tags


class FsgdClassifier(ClassifierMixin, _FsgdBase):
    """loss: "logistic" (predict_proba) or "svm" (hinge). class_weight: None,
    "balanced" or {class: weight}, as scikit-learn's; with sample_weight (fit)
    each row's loss is weighted, as fsgd train's --class-weight and VW's
    importance weights weigh it (rows of weight 0 are left out)."""

    def __init__(self, loss="logistic", *, epochs="auto", lr="auto", l2="auto", batch=256, seed=1, codec="none",
                 threads=None, fit_intercept=True, optimizer="adam", l1=0.0, max_epochs=50, class_weight=None):
        super().__init__(epochs=epochs, lr=lr, l2=l2, batch=batch, seed=seed, codec=codec, threads=threads,
                         fit_intercept=fit_intercept, optimizer=optimizer, l1=l1, max_epochs=max_epochs)
        self.loss = loss
        self.class_weight = class_weight

    def fit(self, X, y, sample_weight=None):
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError(f"FsgdClassifier needs samples of at least 2 classes; got 1 class: {self.classes_[0]}")
        self.n_features_in_ = X.shape[1]
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        cw = compute_class_weight(self.class_weight, classes=self.classes_, y=y)
        if len(self.classes_) == 2:
            # fsgd train's --class-weight POS,NEG (repr: read back exactly)
            both = None if np.all(cw == 1) else f"{float(cw[1])!r},{float(cw[0])!r}"
            self.models_ = [_fit_one(self, X, np.where(y == self.classes_[1], 1.0, -1.0), self.loss, sample_weight,
                                     both)]
            return self
        # one-vs-rest: "the rest" holds classes of different weights, so each
        # row carries its own class's weight (times its sample_weight)
        w = None
        if sample_weight is not None or not np.all(cw == 1):
            w = cw[np.searchsorted(self.classes_, y)] * (1.0 if sample_weight is None else sample_weight)
        self.models_ = [_fit_one(self, X, np.where(y == c, 1.0, -1.0), self.loss, w) for c in self.classes_]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()  # ClassifierMixin's classifier_tags, set after _FsgdBase's
        tags.classifier_tags.poor_score = True
        return tags

    def decision_function(self, X):
        m = self._margins(X)
        return m[:, 0] if m.shape[1] == 1 else m

    def predict(self, X):
        m = self._margins(X)
        if m.shape[1] == 1:
            return self.classes_[(m[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(m, axis=1)]

    @available_if(lambda self: self.loss == "logistic")  # hinge loss: no probabilities
    def predict_proba(self, X):
        p = 1.0 / (1.0 + np.exp(-self._margins(X)))
        if p.shape[1] == 1:
            return np.column_stack([1.0 - p[:, 0], p[:, 0]])
        return p / p.sum(axis=1, keepdims=True)  # one-vs-rest, normalised


class FsgdRegressor(RegressorMixin, _FsgdBase):
    """Linear regression (squared loss). No sample_weight: fsgd weighs the
    rows of classification models only."""

    def fit(self, X, y):
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)
        if X.shape[0] < 2:  # fsgd train holds a row out to stop early
            raise ValueError(f"FsgdRegressor needs at least 2 samples; got n_samples = {X.shape[0]}")
        self.n_features_in_ = X.shape[1]
        self.models_ = [_fit_one(self, X, y, "linear")]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags

    def predict(self, X):
        return self._margins(X)[:, 0]
