/*
** kb_bm25 in C: the FTS5 auxiliary function of kb/ranking.py, as an SQLite loadable
** extension. The same score as the Python function (the same k1, b, weights, idf floor and
** order of arithmetic, so the same doubles), at a fraction of its cost per record: the Python
** function runs through apsw's callbacks, 3-4 us a record; this one a few hundred ns. It is
** built at install time where a C compiler and SQLite's headers are at hand (hatch_build.py)
** and loaded by kb.ranking.Ranker; without it kb ranks with the Python function.
**
** kb_bm25(records_fts, slots): `slots` is kb.ranking.Slots.literal(), a JSON array
** [[phrase slots], [slot record counts], most, [column weights]], numbers only. A phrase's
** slot is -1 where it ranks nothing. Past `most` records scored in one statement the
** function fails with an error (the Python function's TooMany): the searcher then ranks with
** FTS5's bm25.
**
** FTS5's interface comes with sqlite3.h (SQLite's amalgamation appends fts5.h to it).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

/* FTS5's own constants (fts5_aux.c), as kb/ranking.py's K1, B and IDF_FLOOR. */
#define K1 1.2
#define B 0.75
#define IDF_FLOOR 1e-6
/* xPhraseFirst and xPhraseNext came with version 2 of the extension API. */
#define MIN_API_VERSION 2

/* What the function keeps from one row of a statement to the next (FTS5's aux data). */
typedef struct Statement {
    int n_ranked;      /* the phrases that count */
    int *phrase;       /* each one's phrase, in FTS5's order */
    int *slot;         /* and its slot */
    int n_slots;
    double *idf;       /* a slot's */
    double *frequency; /* a slot's, for the row being scored */
    int n_weights;
    double *weight;    /* a column's */
    double average;    /* the mean record's tokens */
    sqlite3_int64 most;
    sqlite3_int64 scored;
} Statement;

static void statement_free(void *p) {
    Statement *s = (Statement *)p;
    if (s == NULL) return;
    free(s->phrase);
    free(s->slot);
    free(s->idf);
    free(s->frequency);
    free(s->weight);
    free(s);
}

/* The numbers of `text` (the slots literal) by their place: the top-level item each is in
** (0 slots, 1 counts, 2 most, 3 weights) and its value. Returns how many, -1 when the text
** is not such an array. */
static int numbers_of(const char *text, int *item, double *value, int room) {
    int depth = 0, top = 0, n = 0;
    const char *p = text;
    while (*p) {
        char c = *p;
        if (c == '[') {
            depth++;
            p++;
        } else if (c == ']') {
            depth--;
            p++;
        } else if (c == ',') {
            if (depth == 1) top++;
            p++;
        } else if (c == ' ') {
            p++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            char *end;
            double v = strtod(p, &end);
            if (end == p || n >= room || depth < 1) return -1;
            item[n] = top;
            value[n] = v;
            n++;
            p = end;
        } else {
            return -1;
        }
    }
    return depth == 0 ? n : -1;
}

/* FTS5's idf of a phrase that `holding` of `records` records hold (kb.ranking.idf). */
static double idf_of(sqlite3_int64 records, sqlite3_int64 holding) {
    double value = log(((double)(records - holding) + 0.5) / ((double)holding + 0.5));
    return value > 0.0 ? value : IDF_FLOOR;
}

static Statement *statement_new(const Fts5ExtensionApi *api, Fts5Context *fts, const char *text) {
    int room = (int)strlen(text) + 1, n, i;
    int *item = malloc(sizeof(int) * room);
    double *value = malloc(sizeof(double) * room);
    Statement *s = calloc(1, sizeof(Statement));
    sqlite3_int64 records = 0, tokens = 0;
    int n_phrases = 0, k = 0, ok = 1;
    if (item == NULL || value == NULL || s == NULL) goto fail;
    n = numbers_of(text, item, value, room);
    if (n < 0) goto fail;
    for (i = 0; i < n; i++) {
        if (item[i] == 0) n_phrases++;
        else if (item[i] == 1) s->n_slots++;
        else if (item[i] == 3) s->n_weights++;
    }
    s->phrase = malloc(sizeof(int) * (n_phrases + 1));
    s->slot = malloc(sizeof(int) * (n_phrases + 1));
    s->idf = malloc(sizeof(double) * (s->n_slots + 1));
    s->frequency = malloc(sizeof(double) * (s->n_slots + 1));
    s->weight = malloc(sizeof(double) * (s->n_weights + 1));
    if (!s->phrase || !s->slot || !s->idf || !s->frequency || !s->weight) goto fail;
    if (api->xRowCount(fts, &records) != SQLITE_OK) goto fail;
    if (api->xColumnTotalSize(fts, -1, &tokens) != SQLITE_OK) goto fail;
    s->average = records ? (double)tokens / (double)records : 1.0;
    s->most = -1;
    {
        int phrase = 0, slot = 0, column = 0;
        for (i = 0; i < n; i++) {
            double v = value[i];
            switch (item[i]) {
            case 0:
                if ((int)v >= 0) {
                    s->phrase[k] = phrase;
                    s->slot[k] = (int)v;
                    k++;
                }
                phrase++;
                break;
            case 1:
                s->idf[slot++] = idf_of(records, (sqlite3_int64)v);
                break;
            case 2:
                s->most = (sqlite3_int64)v;
                break;
            case 3:
                s->weight[column++] = v;
                break;
            default:
                ok = 0;
            }
        }
    }
    s->n_ranked = k;
    for (i = 0; i < k; i++) {
        if (s->slot[i] >= s->n_slots) ok = 0;
    }
    if (!ok || s->most < 0) goto fail;
    free(item);
    free(value);
    return s;
fail:
    free(item);
    free(value);
    statement_free(s);
    return NULL;
}

/* FTS5's bm25 of the frequencies at length normalisation `norm` (negative, lower is better):
** each slot's idf times its saturated frequency, added as fts5_aux.c adds. */
static double score_of(const Statement *s, double norm) {
    double total = 0.0;
    int i;
    for (i = 0; i < s->n_slots; i++) {
        double f = s->frequency[i];
        total += s->idf[i] * ((f * (K1 + 1.0)) / (f + norm));
    }
    return -total;
}

static void kb_bm25(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                    int argc, sqlite3_value **argv) {
    Statement *s;
    int i, size = 0;
    double norm;
    if (api->iVersion < MIN_API_VERSION) {
        sqlite3_result_error(ctx, "kb_bm25: FTS5's extension API is too old", -1);
        return;
    }
    s = (Statement *)api->xGetAuxdata(fts, 0);
    if (s == NULL) { /* the statement's first row */
        const unsigned char *text = argc == 1 ? sqlite3_value_text(argv[0]) : NULL;
        if (text == NULL || (s = statement_new(api, fts, (const char *)text)) == NULL) {
            sqlite3_result_error(ctx, "kb_bm25: its argument is not kb's slots", -1);
            return;
        }
        if (api->xSetAuxdata(fts, s, statement_free) != SQLITE_OK) {
            sqlite3_result_error_nomem(ctx);
            return;
        }
    }
    if (s->scored >= s->most) {
        char message[80];
        snprintf(message, sizeof message, "kb_bm25: more than %lld records to score",
                 (long long)s->most);
        sqlite3_result_error(ctx, message, -1);
        return;
    }
    s->scored++;
    for (i = 0; i < s->n_slots; i++) s->frequency[i] = 0.0;
    for (i = 0; i < s->n_ranked; i++) {
        Fts5PhraseIter it;
        int column = 0, offset = 0;
        double frequency = 0.0;
        if (api->xPhraseFirst(fts, s->phrase[i], &it, &column, &offset) != SQLITE_OK) {
            sqlite3_result_error(ctx, "kb_bm25: a phrase's instances could not be read", -1);
            return;
        }
        /* instance by instance, in FTS5's order (column, then offset), as bm25 adds */
        for (; column >= 0; api->xPhraseNext(fts, &it, &column, &offset)) {
            if (column < s->n_weights) frequency += s->weight[column];
        }
        /* a word's phrases in the groups its record did not match hold nothing */
        if (frequency > s->frequency[s->slot[i]]) s->frequency[s->slot[i]] = frequency;
    }
    if (api->xColumnSize(fts, -1, &size) != SQLITE_OK) {
        sqlite3_result_error(ctx, "kb_bm25: the record's size could not be read", -1);
        return;
    }
    norm = K1 * (1.0 - B + B * (double)size / s->average);
    sqlite3_result_double(ctx, score_of(s, norm));
}

/* FTS5's API object of the connection (SQLite's documented way: SELECT fts5(?1)). */
static fts5_api *fts5_api_of(sqlite3 *db) {
    fts5_api *api = NULL;
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_pointer(stmt, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return api;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_kbbm_init(sqlite3 *db, char **error, const sqlite3_api_routines *routines) {
    fts5_api *api;
    SQLITE_EXTENSION_INIT2(routines);
    api = fts5_api_of(db);
    if (api == NULL || api->iVersion < MIN_API_VERSION) {
        *error = sqlite3_mprintf("kb_bm25: this SQLite has no FTS5 of version %d or later",
                                 MIN_API_VERSION);
        return SQLITE_ERROR;
    }
    return api->xCreateFunction(api, "kb_bm25", NULL, kb_bm25, NULL);
}
