/* "did you mean" for a mistyped command or option (cli.h,
 * fsgd_cli_suggest): the candidate nearest by edit distance (adjacent
 * transpositions count one, as in git's and cargo's suggestions), offered
 * only when it is close for the word's length and no other is as close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fsgd/job.h"

#define WORD_MAX 64

/* Optimal string alignment distance of a and b (both < WORD_MAX). */
static int distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n >= WORD_MAX || m >= WORD_MAX)
        return WORD_MAX;
    int d[WORD_MAX][WORD_MAX];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

const char *fsgd_cli_suggest(const char *word, const char *const *cands, unsigned long n)
{
    const char *best = NULL;
    int best_d = WORD_MAX, ties = 0;
    size_t len = strlen(word);
    for (size_t i = 0; i < n; i++) {
        int d = distance(word, cands[i]);
        /* a prefix of a longer name (--epoch of --epochs) is as good as one edit */
        if (len >= 4 && !strncmp(cands[i], word, len) && d > 1)
            d = 1;
        if (d < best_d) {
            best = cands[i];
            best_d = d;
            ties = 0;
        } else if (d == best_d && strcmp(best, cands[i]) != 0) {
            ties++;
        }
    }
    /* at most 1 edit in a short word, 2 in a longer one (--ecpohs) */
    int limit = len <= 6 ? 1 : 2;
    return best && best_d > 0 && best_d <= limit && !ties ? best : NULL;
}

/* The "--flag" of every job option, read from the job's help (the one list
 * of them), and the options of the commands that parse their own. */
static const char *const own_options[] = {
    "--model", "--data", "--out", "--proba", "--quiet", "--skip-bad", "--format", "--brokers", "--name",
    "--job-key-file", "--input", "--partial", "--rows", "--dim", "--nnz", "--seed", "--title", "--help",
};

const char *fsgd_cli_suggest_option(const char *word)
{
    static char *text;
    static const char *flags[512];
    static size_t n;
    if (!text) {
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (!mem)
            return NULL;
        fsgd_job_print_help_with("", &(fsgd_job_t){0}, mem);
        fclose(mem);
        for (char *p = text; p && (p = strstr(p, "\n  --")) && n < sizeof flags / sizeof *flags - 32;) {
            p += 3;
            flags[n++] = p;
            p += strcspn(p, " \n");
            if (*p)
                *p++ = '\0';
        }
        for (size_t i = 0; i < sizeof own_options / sizeof *own_options; i++)
            flags[n++] = own_options[i];
    }
    return fsgd_cli_suggest(word, flags, n);
}
