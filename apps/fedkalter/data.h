/* data.h - the clients' data of fedkalter: one graph-classification dataset per client (a TU
 * dataset or a generated one), structure encodings computed once per graph, and the stratified
 * 80/10/10 split with a fixed split seed (docs/fedkalter.md).
 *
 * Not collective: a rank builds the datasets of its own clients, from the options only, so
 * every rank that builds a dataset sees the same graphs and the same split; the sizes of all
 * clients come from fk_dataset_tu_count and fk_split_sizes without parsing the graphs. */
#ifndef FEDKALTER_DATA_H
#define FEDKALTER_DATA_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "io/graphs.h"   /* tess_graphs */

enum { FK_SE_K = 16, FK_SE_DIM = 2 * FK_SE_K, FK_MAX_CLIENTS = 64 };

/* One client's dataset (owned; fk_dataset_free). */
typedef struct {
    tess_graphs gs;        /* all graphs: CSR, one-hot node features x (N, F), labels y */
    float *se;             /* (N, FK_SE_DIM) [RWSE | DSE] of every node */
    int64_t *split;        /* (G) ids, train first, then val, then test */
    int64_t n_train, n_val, n_test;
} fk_dataset;

/* The TU names of a setting, in client order: "SM" (MUTAG, BZR, COX2, DHFR, PTC_MR, AIDS, NCI1),
 * "SM-CV" (SM, Letter-low, -med, -high), "BIO-SM" (SM, ENZYMES, PROTEINS), "BIO-SM-SN" (BIO-SM,
 * IMDB-BINARY, IMDB-MULTI), "BIO-SN-CV" (ENZYMES, PROTEINS, IMDB-*, Letter-*), "SM-SN-CV" (SM,
 * IMDB-*, Letter-*). Returns the count, or 0 for an unknown setting. names must hold
 * FK_MAX_CLIENTS. */
int fk_setting_datasets(const char *setting, const char **names);
/* The datasets a setting lists but this loader does not have ("DD", "DD, COLLAB"), or NULL when
 * the setting is complete (or unknown). */
const char *fk_setting_missing(const char *setting);

/* Client k of a generated setting of n clients: G graphs of 8..24 nodes, 2 classes that differ
 * in the density of chords and in the node-label distribution, F = 3 + k % 4 one-hot node labels,
 * all drawn from Philox keyed by (seed, k). */
tess_status fk_dataset_synthetic(fk_dataset *ds, int64_t k, int64_t G, uint64_t seed);

/* TU dataset <dir>/<name> (raw text files) through tess_graphs_from_tu: graph labels remapped to
 * 0..C-1, one-hot node labels of width max - min + 1 (Letter-*: the 2 node coordinates; IMDB-*:
 * one-hot degree, width max degree + 1), edges deduplicated, self loops dropped. TESS_ERR_NOINPUT / TESS_ERR_DATA naming the file. */
tess_status fk_dataset_tu(fk_dataset *ds, const char *dir, const char *name);

/* The graphs of TU dataset <dir>/<name> without parsing it: the non-blank lines of
 * <name>_graph_labels.txt (tess_graphs_from_tu checks that the other files agree).
 * TESS_ERR_NOINPUT naming the file, TESS_ERR_IO on a read error. */
tess_status fk_dataset_tu_count(const char *dir, const char *name, int64_t *G);

/* GCFL's oneDS split of one dataset of G graphs (its name: errors) over N clients: with
 * m = min(50, floor(G / N)), graph g < N m goes to client floor(g / m) (file order, as the
 * reference's consecutive chunks), every later graph to a client drawn uniformly (Philox keyed
 * by seed). client (G) gets each graph's client, size (N) each client's graph count. Depends on
 * (G, N, seed) only: every rank computes it without parsing. TESS_ERR_DATA naming the dataset,
 * G and N when m = 0 or when a client's 80/10/10 split would be empty (fk_split_sizes). */
tess_status fk_oneds_assign(const char *name, int64_t G, int64_t N, uint64_t seed,
                            int32_t *client, int64_t *size);

/* Client k's part of a parsed dataset: the graphs g of src with client[g] == k, in file order,
 * copied (owned by ds; fk_dataset_free); gs.name = name, the totals and features of src.
 * TESS_ERR_MEM. */
tess_status fk_dataset_subset(fk_dataset *ds, const tess_graphs *src, const int32_t *client,
                              int64_t k, const char *name);

/* The split sizes of G graphs: ceil(0.2 G) held out, halved into val (floor) and test (ceil),
 * the rest train. TESS_ERR_DATA naming the dataset `name` and the sizes when a part is empty. */
tess_status fk_split_sizes(const char *name, int64_t G, int64_t *n_train, int64_t *n_val,
                           int64_t *n_test);

/* Structure encodings of every graph and the stratified split: per class c the ids are shuffled
 * (Philox keyed by (split_seed, client)), the test+val part is ceil(0.2 G) graphs, allotted to
 * classes by largest remainder, and halved into val (floor) and test (ceil) the same way. Every
 * split must be non-empty (TESS_ERR_DATA naming the dataset). */
tess_status fk_dataset_prepare(fk_dataset *ds, int64_t client, uint64_t split_seed);

void fk_dataset_free(fk_dataset *ds);

#endif
