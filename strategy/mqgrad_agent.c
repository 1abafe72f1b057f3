/* MQGrad's agent (Cui et al., "MQGrad: Reinforcement Learning of Gradient
 * Quantization in Parameter Server", sec. 3.3 and Alg. 2).
 *
 * MDP step t covers training steps tT+1 .. (t+1)T. Over them the agent
 * smooths the global losses, eq. (1):
 *     L̄^i = α L^i + (1 - α) L̄^{i-1}   (L̄ carries over between MDP steps;
 *                                       the very first L̄ is the first loss)
 * and adds up the step times. When the window is full:
 *   state   s_t = [n_t, L̄_t],  n_t = n_{t-1} + argmax_a Q(s_{t-1}, a)   (eq. 3)
 *   reward  r_{t-1} = -β / c_t · γ                                       (eq. 2)
 *           β: least-squares slope of L̄_t^i over i = 1..T, c_t: the
 *           window's time in milliseconds (at least 1, c ∈ Z+); with norm=1
 *           L̄ (for β and the Q inputs) is divided by the first loss and c_t
 *           by the fastest window's ms so far (beyond the paper)
 *   action  a_t ε-greedy over {0, +1} ({-1, 0, +1} with lower=1), keeping
 *           n_t + a_t within [min_bits, max_bits]                    (π, sec. 3.3)
 *   SARSA   v += η [r_{t-1} + δ Q(s_t, a_t) - Q(s_{t-1}, a_{t-1})] ∂Q(s_{t-1}, a_{t-1})/∂v
 *                                                                    (Alg. 2 line 5)
 *   bits    n_t + a_t for the next T training steps                 (Alg. 2 line 6)
 * Q network (sec. 4.1): T inputs (the smoothed losses), `hidden` ReLU
 * units, one linear output per bit count min_bits..max_bits; Q(s, a) is the
 * output of bit count n + a, so the state's n picks the outputs. The paper
 * writes γ both for the reward scale (300) and in the SARSA update; a
 * discount of 300 diverges, so the discount δ is its own parameter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mqgrad_agent.h"

#define MAXT 64

struct fsgd_mq_agent {
    fsgd_mq_agent_params_t p;
    int nout;
    double *w1, *b1, *w2, *b2; /* hidden x T, hidden, nout x hidden, nout */
    double *h, *pre;           /* scratch: hidden activations */
    uint64_t rng;
    /* window being collected */
    double lbar;               /* last smoothed loss */
    double l_ref, c_ref;       /* norm=1: the run's loss and time units (first loss, fastest window's ms) */
    int have_lbar;
    double win[MAXT];
    int nwin;
    double secs;
    /* last MDP step */
    long t;
    double x_prev[MAXT];       /* s_{t-1}'s input */
    int n_prev, a_prev;
    int bits;
    double reward;
};

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) from 53 random bits. */
static double unif(uint64_t *s) { return (double)(splitmix(s) >> 11) * 0x1p-53; }

fsgd_mq_agent_t *fsgd_mq_agent_new(const fsgd_mq_agent_params_t *p, uint64_t seed)
{
    if (p->T < 2 || p->T > MAXT || p->min_bits > p->max_bits || p->hidden < 1)
        return NULL;
    fsgd_mq_agent_t *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->p = *p;
    a->nout = p->max_bits - p->min_bits + 1;
    int H = p->hidden, T = p->T, O = a->nout;
    a->w1 = calloc((size_t)H * T + H + (size_t)O * H + O + 2 * (size_t)H, sizeof(double));
    if (!a->w1) {
        free(a);
        return NULL;
    }
    a->b1 = a->w1 + (size_t)H * T;
    a->w2 = a->b1 + H;
    a->b2 = a->w2 + (size_t)O * H;
    a->h = a->b2 + O;
    a->pre = a->h + H;
    /* The paper does not say how v starts: uniform in ±1/sqrt(fan_in)
     * (the usual default for a dense layer), biases 0. */
    a->rng = seed ^ 0x4D51477261644147ull; /* "MQGradAG" */
    for (int i = 0; i < H * T; i++)
        a->w1[i] = (2 * unif(&a->rng) - 1) / sqrt((double)T);
    for (int i = 0; i < O * H; i++)
        a->w2[i] = (2 * unif(&a->rng) - 1) / sqrt((double)H);
    a->t = -1;
    a->bits = p->bits0;
    a->n_prev = p->bits0;
    a->reward = NAN;
    return a;
}

void fsgd_mq_agent_destroy(fsgd_mq_agent_t *a)
{
    if (!a)
        return;
    free(a->w1);
    free(a);
}

/* Forward pass: a->h, a->pre for input x; returns output o's value. */
static double forward(fsgd_mq_agent_t *a, const double *x, int o)
{
    int H = a->p.hidden, T = a->p.T;
    for (int j = 0; j < H; j++) {
        double s = a->b1[j];
        for (int i = 0; i < T; i++)
            s += a->w1[j * T + i] * x[i];
        a->pre[j] = s;
        a->h[j] = s > 0 ? s : 0;
    }
    double q = a->b2[o];
    for (int j = 0; j < H; j++)
        q += a->w2[o * H + j] * a->h[j];
    return q;
}

static int allowed(const fsgd_mq_agent_t *a, int n, int act)
{
    if (act < 0 && !a->p.lower)
        return 0;
    return n + act >= a->p.min_bits && n + act <= a->p.max_bits;
}

/* argmax_a Q(x, a) at bits n; ties keep the bits (eq. 3: "if Q(s,0) >= Q(s,1)
 * keep"), then prefer fewer bits. */
static int greedy(fsgd_mq_agent_t *a, const double *x, int n, double q[3])
{
    int best = 0;
    for (int act = -1; act <= 1; act++)
        q[act + 1] = allowed(a, n, act) ? forward(a, x, n + act - a->p.min_bits) : NAN;
    if (isnan(q[1])) /* n itself out of range cannot happen: n is clamped */
        return 0;
    for (int act = -1; act <= 1; act++)
        if (!isnan(q[act + 1]) && q[act + 1] > q[best + 1])
            best = act;
    return best;
}

/* v += step · ∂Q(x, o)/∂v */
static void sgd(fsgd_mq_agent_t *a, const double *x, int o, double step)
{
    int H = a->p.hidden, T = a->p.T;
    forward(a, x, o);
    for (int j = 0; j < H; j++) {
        double dh = a->pre[j] > 0 ? a->w2[o * H + j] : 0;
        a->w2[o * H + j] += step * a->h[j];
        if (dh != 0) {
            for (int i = 0; i < T; i++)
                a->w1[j * T + i] += step * dh * x[i];
            a->b1[j] += step * dh;
        }
    }
    a->b2[o] += step;
}

/* Least-squares slope of y[0..T) over i = 1..T. */
static double slope(const double *y, int T)
{
    double mi = (T + 1) / 2.0, my = 0, sxy = 0, sxx = 0;
    for (int i = 0; i < T; i++)
        my += y[i];
    my /= T;
    for (int i = 0; i < T; i++) {
        sxy += (i + 1 - mi) * (y[i] - my);
        sxx += (i + 1 - mi) * (i + 1 - mi);
    }
    return sxy / sxx;
}

static void mdp_step(fsgd_mq_agent_t *a)
{
    const fsgd_mq_agent_params_t *p = &a->p;
    double x[MAXT], q[3];
    memcpy(x, a->win, sizeof(double) * (size_t)p->T);
    double c_ms = a->secs * 1000.0;
    if (!(c_ms >= 1))
        c_ms = 1;
    if (p->norm) {
        /* γ = 300 and the Q network's inputs fit the paper's units (its
         * CIFAR-10 loss, ms on its cluster); on a flatter loss or faster steps
         * the rewards sit orders of magnitude below the Q network's initial
         * outputs, which ε-exploration then never corrects. So L̄ is in units
         * of the run's first loss and c in units of its fastest window (not
         * the first: that one carries start-up): eq. (2) times c_ref / l_ref,
         * a constant once c_ref settles, so rewards keep the paper's order. */
        if (a->t < 0 || c_ms < a->c_ref)
            a->c_ref = c_ms;
        for (int i = 0; i < p->T; i++)
            x[i] /= a->l_ref;
        c_ms /= a->c_ref;
    }
    int n;
    if (a->t < 0) {
        n = p->bits0;
    } else {
        double qp[3];
        n = a->n_prev + greedy(a, a->x_prev, a->n_prev, qp); /* eq. (3) */
    }
    int g = greedy(a, x, n, q);
    int act = g;
    if (unif(&a->rng) < p->eps) { /* explore: one of the other allowed actions */
        int others[2], no = 0;
        for (int c = -1; c <= 1; c++)
            if (c != g && !isnan(q[c + 1]))
                others[no++] = c;
        if (no)
            act = others[no > 1 ? (int)(splitmix(&a->rng) % (uint64_t)no) : 0];
    }
    if (a->t >= 0) {
        double r = -slope(x, p->T) / c_ms * p->gamma; /* eq. (2) */
        int o_prev = a->n_prev + a->a_prev - p->min_bits;
        double target = r + p->discount * q[act + 1];
        double delta = target - forward(a, a->x_prev, o_prev);
        if (isfinite(delta))
            sgd(a, a->x_prev, o_prev, p->eta * delta);
        a->reward = r;
    }
    a->t++;
    memcpy(a->x_prev, x, sizeof x);
    a->n_prev = n;
    a->a_prev = act;
    a->bits = n + act;
}

int fsgd_mq_agent_step(fsgd_mq_agent_t *a, double loss, double seconds)
{
    if (!isfinite(loss))
        return a->bits;
    if (!a->have_lbar) /* norm=1's loss unit; a zero first loss would divide by 0 */
        a->l_ref = fabs(loss) > 0 ? fabs(loss) : 1;
    a->lbar = a->have_lbar ? a->p.alpha * loss + (1 - a->p.alpha) * a->lbar : loss; /* eq. (1) */
    a->have_lbar = 1;
    a->win[a->nwin++] = a->lbar;
    a->secs += isfinite(seconds) && seconds > 0 ? seconds : 0;
    if (a->nwin == a->p.T) {
        mdp_step(a);
        a->nwin = 0;
        a->secs = 0;
    }
    return a->bits;
}

int fsgd_mq_agent_bits(const fsgd_mq_agent_t *a) { return a->bits; }
double fsgd_mq_agent_reward(const fsgd_mq_agent_t *a) { return a->reward; }
long fsgd_mq_agent_t_index(const fsgd_mq_agent_t *a) { return a->t; }
int fsgd_mq_agent_state_bits(const fsgd_mq_agent_t *a) { return a->n_prev; }

double fsgd_mq_agent_q(const fsgd_mq_agent_t *a, int action)
{
    if (a->t < 0 || action < -1 || action > 1 || !allowed(a, a->n_prev, action))
        return NAN;
    return forward((fsgd_mq_agent_t *)a, a->x_prev, a->n_prev + action - a->p.min_bits);
}
