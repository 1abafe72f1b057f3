/* The data-dependent defaults of fsgd train (l2 auto, lr auto), shared by
 * the in-memory and the streaming trainer. */
#include <math.h>

#include "fsgd/train.h"

/* l2 auto: LIBLINEAR minimises |w|²/2 + C·Σ loss_i; divided by C·n that is
 * mean loss + |w|²/(2Cn), whose gradient term is λθ with λ = 1/(C·n). C = 1
 * is LIBLINEAR's default, so λ shrinks as the data grows. */
double fsgd_train_auto_l2(const fsgd_train_params_t *job, size_t n_fit)
{
    return job->l2 < 0 ? 1.0 / (double)(n_fit ? n_fit : 1) : job->l2;
}

/* lr auto: Adam moves a touched weight by about lr a step, whatever the
 * gradient's scale, so what matters is how many steps an epoch has:
 * lr = 0.15 / sqrt(steps per epoch), the 1/sqrt(T) step of SGD theory for a
 * budget of about one epoch, kept within [0.001, 0.02]. On the shipped sets
 * (30-180 steps an epoch) that is 0.01-0.02; on 1M-row CTR data (3500
 * steps) 0.0025, where 0.01 overfits the rare features within a quarter
 * epoch.
 * Under a bounded delay τ a gradient misses up to τ updates, which with its
 * own move every weight of a row by up to (τ + 1)·lr before the gradients
 * see it, its margin by (τ + 1)·lr·row_l1 (row_l1: a row's mean Σ|x|).
 * Those steps overshoot together and swing (400k CTR rows, 40 binary
 * features, 1 epoch, τ 4: test AUC 0.11 below τ 0 at B 4096, 0.009 at
 * 2048, 0.005 at 512, the loss cycling between 0.6 and 1.3 every ~20
 * steps), so lr is kept to FSGD_TRAIN_DELAY_MARGIN / ((τ + 1)·row_l1):
 * 0.0039 on those rows, every B then within 0.002 of τ 0 in three seeds.
 * Rows of small values (ijcnn1: row_l1 3) and long jobs (1M CTR rows:
 * lr 0.0035) keep their lr. τ = 0 leaves lr as it was, bit for bit. */
double fsgd_train_auto_lr(const fsgd_train_params_t *job, size_t n_fit, size_t B, int tau, double row_l1)
{
    if (job->lr >= 0)
        return job->lr;
    double lr = FSGD_TRAIN_LR_AUTO_C / sqrt(ceil((double)n_fit / (double)(B ? B : 1)));
    lr = lr < FSGD_TRAIN_LR_AUTO_MIN ? FSGD_TRAIN_LR_AUTO_MIN : lr > FSGD_TRAIN_LR_AUTO_MAX ? FSGD_TRAIN_LR_AUTO_MAX : lr;
    /* Crosses: each of a row's k entries moves by about lr, so its margin by
     * about k·lr; a row of f features and k - f crosses takes lr·f/k, the
     * margin step of its features alone (VW's normalized updates divide by
     * the row's norm for the same reason). a9a with -q aa (14 features, 119
     * entries a row): 0.0017 instead of 0.014, test AUC 0.9040 against 0.8973.
     * Rows without crosses keep lr as it was. */
    if (job->lr_auto_share > 0 && job->lr_auto_share < 1)
        lr *= job->lr_auto_share;
    if (tau > 0 && row_l1 > 0) {
        double cap = FSGD_TRAIN_DELAY_MARGIN / ((double)(tau + 1) * row_l1);
        if (lr > cap)
            lr = cap;
    }
    return lr;
}

double fsgd_train_row_l1(const fsgd_train_params_t *job, double abs_sum, uint64_t n)
{
    if (n == 0)
        return 0;
    return abs_sum / (double)n + (job->bias ? fabs(job->bias_value) : 0.0);
}

/* β1 auto: 0.9, Adam's, without delay. A bounded delay τ > 0 already
 * carries past steps into each update (asynchrony acts as momentum:
 * Mitliagkas et al., "Asynchrony begets momentum", 2016), and β1 = 0.9 on
 * top of it swung the weights: 400k CTR rows, τ 4, B 4096 at the lr above,
 * test AUC 0.743 with β1 0.9 against 0.772 with 0 (τ 0: 0.772). Only with
 * lr auto, the pair measured together: an explicit lr keeps Adam's 0.9
 * (Criteo rows with crosses, lr 0.01, τ 2, 3 workers: 0.748 with 0.9,
 * 0.739 with 0). */
double fsgd_train_auto_beta1(const fsgd_train_params_t *job, int tau)
{
    if (job->beta1 >= 0)
        return job->beta1;
    return tau > 0 && job->lr < 0 ? 0.0 : FSGD_TRAIN_BETA1;
}

/* alpha auto: FTRL's per-coordinate rate α/(β + sqrt(n_k)) takes the sum
 * of a step's rows' gradients, so a key in many rows of every step sees its
 * rate fall as 1/(B·sqrt(t)) and a long epoch needs a smaller α to keep its
 * rare keys from overfitting, as lr auto does for Adam: measured best near
 * 0.03 on 1M-row CTR data (3700 steps an epoch), 0.15-0.4 on the shipped
 * sets (30-180 steps). */
double fsgd_train_auto_alpha(const fsgd_train_params_t *job, size_t n_fit, size_t B)
{
    if (job->alpha >= 0)
        return job->alpha;
    double a = FSGD_TRAIN_ALPHA_AUTO_C / sqrt(ceil((double)n_fit / (double)(B ? B : 1)));
    return a < FSGD_TRAIN_ALPHA_AUTO_MIN ? FSGD_TRAIN_ALPHA_AUTO_MIN
           : a > FSGD_TRAIN_ALPHA_AUTO_MAX ? FSGD_TRAIN_ALPHA_AUTO_MAX
                                           : a;
}

/* A distributed step costs a round trip over the broker and the
 * aggregator's update whatever its rows, so each worker takes the rows of a
 * single-process step (measured: at 1M CTR rows and 2 workers, 512-row
 * steps end 0.0007 test AUC below 256-row ones in fsgd train). Larger steps
 * mean fewer updates an epoch: at least 2000 steps an epoch keeps the loss
 * of 1024-row steps (0.0018 below at 1M rows, 930 steps) away. */
uint64_t fsgd_train_auto_batch(const fsgd_train_params_t *job, uint64_t n_fit, int workers)
{
    double B;
    if (job->batch >= 1)
        B = floor(job->batch);
    else if (job->batch > 0)
        B = ceil(job->batch * (double)n_fit);
    else {
        B = (double)FSGD_TRAIN_BATCH_AUTO * (workers > 1 ? workers : 1);
        double cap = floor((double)n_fit / FSGD_TRAIN_BATCH_MIN_STEPS);
        if (B > cap)
            B = cap > FSGD_TRAIN_BATCH_AUTO ? cap : FSGD_TRAIN_BATCH_AUTO;
    }
    return B < 1 ? 1 : (uint64_t)B;
}

uint64_t fsgd_train_looks(size_t n_fit, size_t steps_per_epoch)
{
    uint64_t e = ((uint64_t)n_fit + FSGD_TRAIN_LOOK_ROWS - 1) / FSGD_TRAIN_LOOK_ROWS;
    if (e < FSGD_TRAIN_HOLDOUT_EVALS)
        e = FSGD_TRAIN_HOLDOUT_EVALS;
    return e < steps_per_epoch ? e : (uint64_t)steps_per_epoch;
}

int fsgd_train_patience(uint64_t looks)
{
    return looks / 4 > FSGD_TRAIN_PATIENCE ? (int)(looks / 4) : FSGD_TRAIN_PATIENCE;
}

int fsgd_train_noisy_epochs(size_t n_rows, int max_epochs)
{
    double e = ceil((double)FSGD_TRAIN_NOISY_ROWS / (double)(n_rows ? n_rows : 1));
    if (e < FSGD_TRAIN_NOISY_MIN_EPOCHS)
        e = FSGD_TRAIN_NOISY_MIN_EPOCHS;
    return e > (double)max_epochs ? max_epochs : (int)e;
}

/* Starting the intercept at 0 (p = 0.5) on data with 1% positives makes
 * the first steps push every feature down with the intercept; Adam moves a
 * rare feature by about lr a touch, so that push takes many epochs to undo
 * (measured on 27k rows, 1% positives: 0.69 test AUC after 10 epochs from
 * 0, 0.75 from the log-odds). */
float fsgd_train_start_intercept(const double *label, size_t n, double bias_value)
{
    double pos = 0;
    for (size_t i = 0; i < n; i++)
        pos += label[i] > 0;
    double p = (pos + 0.5) / ((double)n + 1);
    return (float)(log(p / (1 - p)) / (bias_value != 0 ? bias_value : 1));
}

/* efsign runs momentum SGD on the workers with one stepsize η for every
 * key. The fixed η = 0.5, measured on 14 steps an epoch (80k rows, batch
 * 6000), oscillates at batch 256: on 20k rows of 3.2M wide mixed data (70
 * steps an epoch) the test loss went 0.51, 0.54, 0.46, 0.51 over epochs 1-4
 * (the same with block=1, no compression at all: the stepsize, not the
 * codec), early stopping took the first bump, and efsign ended 0.028 test
 * AUC below none. The paper's Corollary 3 takes η ∝ 1/sqrt(T); with T about
 * an epoch, as lr auto does for Adam, 2/sqrt(steps) gives 0.53 on the 14
 * steps where 0.5 was measured best and 0.24 there (0.003 below none). */
double fsgd_train_auto_efsign_lr(size_t n_fit, size_t B)
{
    double lr = FSGD_TRAIN_EFSIGN_LR_C / sqrt(ceil((double)n_fit / (double)(B ? B : 1)));
    return lr < FSGD_TRAIN_EFSIGN_LR_MIN ? FSGD_TRAIN_EFSIGN_LR_MIN
           : lr > FSGD_TRAIN_EFSIGN_LR_MAX ? FSGD_TRAIN_EFSIGN_LR_MAX
                                           : lr;
}
