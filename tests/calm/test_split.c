/* test_split - the calm app's splits (apps/calm/split.h): span boundaries and sizes of tail,
 * block (with the remainder joining the last block) and animal; the windows: every training
 * window inside a training span of a session that is not held out, every test window inside a
 * test span, none straddling a boundary, and their counts; with validation slices, training
 * windows end before them and validation windows lie inside them; the held-out animal's own
 * training windows (the adaptation data) lie in its training part only. */
#include <stdlib.h>
#include <string.h>

#include "split.h"
#include "tess_test.h"

enum { LW = 64, P = 4 };

/* Every window of the list lies inside a span of the wanted kind (train or test) of its
 * session, a held-out session never giving a training window. */
static bool inside(const calm_session *sess, const calm_window *w, int64_t n, bool train) {
    for (int64_t k = 0; k < n; k++) {
        const calm_session *s = &sess[w[k].session];
        bool ok = false;
        for (int64_t i = 0; i < s->nspans; i++)
            ok |= s->spans[i].train == train && w[k].t0 >= s->spans[i].t0 &&
                  w[k].t0 + LW <= s->spans[i].t1 && (!train || !s->held_out);
        if (!ok || w[k].t0 % P) return false;
    }
    return true;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    calm_session s[3] = {{.T = 1000, .animal = 0}, {.T = 1137, .animal = 1}, {.T = 799, .animal = 2}};
    for (int k = 0; k < 3; k++) strcpy(s[k].name, "s");
    static calm_window tr[1000], te[1000];
    int64_t ntr = 0, nte = 0, nv = 0;
    /* tail: [0, 700) / [700, 1000) */
    TESS_TEST_CHECK(calm_split_session(&s[0], CALM_SPLIT_TAIL, 0.7, 500, 0) == TESS_OK, "tail");
    TESS_TEST_CHECK(s[0].nspans == 2 && s[0].spans[0].t1 == 700 && s[0].spans[0].train &&
                        s[0].spans[1].t0 == 700 && s[0].spans[1].t1 == 1000 && !s[0].spans[1].train &&
                        calm_split_train_frames(&s[0]) == 700 && !s[0].held_out,
                    "tail spans");
    /* block, 500 frames: 1000 -> [0,350) [350,500) [500,850) [850,1000); 1137 -> the remainder
     * joins the last block: [500, 1137) is cut at 500 + 445 = 945; 799 -> one block */
    for (int k = 0; k < 3; k++)
        TESS_TEST_CHECK(calm_split_session(&s[k], CALM_SPLIT_BLOCK, 0.7, 500, 0) == TESS_OK, "block");
    TESS_TEST_CHECK(s[0].nspans == 4 && s[0].spans[0].t1 == 350 && s[0].spans[1].t1 == 500 &&
                        s[0].spans[2].t0 == 500 && s[0].spans[2].t1 == 850 && s[0].spans[3].t1 == 1000 &&
                        calm_split_train_frames(&s[0]) == 700,
                    "block spans of 1000 frames");
    TESS_TEST_CHECK(s[1].nspans == 4 && s[1].spans[2].t1 == 945 && s[1].spans[3].t1 == 1137 &&
                        s[2].nspans == 2 && s[2].spans[0].t1 == 559,
                    "block: remainder joins the last block (%lld), a short session is one block",
                    (long long)s[1].spans[2].t1);
    calm_split_windows(s, 3, LW, P, 0.0, tr, &ntr, NULL, &nv, te, &nte);
    /* per training span of length L starting on the grid: (L - 64) / 4 + 1 windows */
    TESS_TEST_CHECK(inside(s, tr, ntr, true) && inside(s, te, nte, false), "block windows inside their spans");
    int64_t c1, c2;
    calm_split_windows(s, 3, LW, P, 0.0, NULL, &c1, NULL, &nv, NULL, &c2);
    TESS_TEST_CHECK(c1 == ntr && c2 == nte && ntr == (72 + 72) + (72 + 96) + 124 && nte > 0,
                    "block window counts: %lld training, %lld test", (long long)ntr, (long long)nte);
    /* animal 1 held out: its first 70 % its own training part, never a training window */
    for (int k = 0; k < 3; k++)
        TESS_TEST_CHECK(calm_split_session(&s[k], CALM_SPLIT_ANIMAL, 0.7, 500, 1) == TESS_OK, "animal");
    TESS_TEST_CHECK(!s[0].held_out && s[1].held_out && !s[2].held_out && s[0].nspans == 1 &&
                        s[0].spans[0].t1 == 1000 && s[1].nspans == 2 && s[1].spans[0].t1 == 795 &&
                        calm_split_train_frames(&s[2]) == 799,
                    "animal spans");
    calm_split_windows(s, 3, LW, P, 0.0, tr, &ntr, NULL, &nv, te, &nte);
    bool held = true;
    for (int64_t k = 0; k < ntr; k++) held &= tr[k].session != 1;
    for (int64_t k = 0; k < nte; k++) held &= te[k].session == 1 && te[k].t0 >= 795;
    TESS_TEST_CHECK(held && inside(s, tr, ntr, true) && inside(s, te, nte, false) &&
                        ntr == (1000 - 64) / 4 + 1 + (799 - 64) / 4 + 1 && nte == (1137 - 796 - 64) / 4 + 1,
                    "animal windows: %lld training (none of animal 1), %lld test (all of animal 1, "
                    "after its training part)", (long long)ntr, (long long)nte);
    /* validation slices (the last 20 % of each training span): training windows end before
     * them, validation windows lie inside them; animal split: [0, 800) | [800, 1000) and
     * [0, 639) | [639, 799) */
    static calm_window va[1000];
    calm_split_windows(s, 3, LW, P, 0.2, tr, &ntr, va, &nv, te, &nte);
    bool sep = true;
    for (int64_t k = 0; k < ntr; k++) sep &= tr[k].t0 + LW <= (tr[k].session == 0 ? 800 : 639);
    for (int64_t k = 0; k < nv; k++) sep &= va[k].t0 >= (va[k].session == 0 ? 800 : 639) && va[k].session != 1;
    TESS_TEST_CHECK(sep && ntr == (800 - 64) / 4 + 1 + (639 - 64) / 4 + 1 &&
                        nv == (200 - 64) / 4 + 1 + (159 - 64) / 4 + 1 && nte == 70,
                    "validation windows: %lld training, %lld validation, %lld test", (long long)ntr,
                    (long long)nv, (long long)nte);
    /* the held-out animal's own training part (the adaptation data): [0, 795) of session 1,
     * validation slice [636, 795); never a test frame, never another animal */
    int64_t na = 0, nav = 0;
    calm_split_held_out_windows(s, 3, LW, P, 0.0, tr, &na, NULL, &nav);
    bool own = nav == 0;
    for (int64_t k = 0; k < na; k++) own &= tr[k].session == 1 && tr[k].t0 + LW <= 795;
    TESS_TEST_CHECK(own && na == (795 - 64) / 4 + 1,
                    "held-out training windows: %lld, all of animal 1 before frame 795", (long long)na);
    calm_split_held_out_windows(s, 3, LW, P, 0.2, tr, &na, va, &nav);
    own = true;
    for (int64_t k = 0; k < na; k++) own &= tr[k].session == 1 && tr[k].t0 + LW <= 636;
    for (int64_t k = 0; k < nav; k++) own &= va[k].session == 1 && va[k].t0 >= 636 && va[k].t0 + LW <= 795;
    TESS_TEST_CHECK(own && na == (636 - 64) / 4 + 1 && nav == (792 - 636 - 64) / 4 + 1,
                    "held-out windows with a validation slice: %lld training before 636, %lld "
                    "validation in [636, 795)", (long long)na, (long long)nav);
    for (int k = 0; k < 3; k++) free(s[k].spans);
    int rc = tess_test_finish("test_split");
    MPI_Finalize();
    return rc;
}
