"""The answer checkers of lectures 04-06.

Right answers are worked out here from the exercise statements (the closed forms the
lectures teach, with the figures the scenarios document), so a checker that drifts from its
own statement fails. Lecture 6 is checked against a made-up comparison: its checkers must
judge the student's own measurement, whatever it is."""
import json
import math

import pytest

from course.check import Verdict, lecture4, lecture5, lecture6

ALL_4_5 = [lecture4.exercise1, lecture4.exercise2, lecture4.exercise3,
           lecture5.exercise1, lecture5.exercise2, lecture5.exercise3]
ALL_6 = [lecture6.exercise1, lecture6.exercise2, lecture6.exercise3]


def ids(f):
    return f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}"


# A comparison as `python -m course compare --json` writes it (only the fields checkers read).
def row(ranks, sync, compress, pred_s, meas_s, pred_tput, meas_tput, pred_phases, meas_phases):
    return {"ranks": ranks, "sync": sync, "compress": compress,
            "predicted_iteration_s": pred_s, "measured_iteration_s": meas_s,
            "predicted_samples_per_s": pred_tput, "measured_samples_per_s": meas_tput,
            "predicted_phases_s": pred_phases, "measured_phases_s": meas_phases,
            "error": 0.0}     # deliberately wrong: checkers must not read it


def phases(compute, exposed, compression, update, other=0.0):
    return {"compute": compute, "data_wait": 0.0, "exposed_comm": exposed,
            "compression": compression, "update": update, "other": other}


RESULT = {"rows": [
    row(1, "ring", "none", 0.0064, 0.0065, 10_000, 9_846,
        phases(0.0051, 0, 0, 0.0013), phases(0.0049, 0.0002, 0, 0.0013)),
    row(2, "ring", "none", 0.0075, 0.0083, 17_067, 15_422,
        phases(0.0051, 0.0011, 0, 0.0013), phases(0.0053, 0.0015, 0, 0.0014)),
    row(2, "ring", "1bit", 0.0389, 0.0258, 3_290, 4_961, phases(0.0051, 0.0001, 0.0324, 0.0013),
        phases(0.0058, 0.0053, 0.0126, 0.0020)),
], "median_abs_error": 0.0}


@pytest.mark.parametrize("check", ALL_4_5, ids=ids)
def test_no_answer_yet_is_not_ok_and_says_what_to_give(check):
    v = check(None)
    assert isinstance(v, Verdict) and not v
    assert str(v).startswith("not yet: set `answer`")


@pytest.mark.parametrize("check", ALL_6, ids=ids)
def test_lecture6_no_answer_yet(check):
    v = check(None, RESULT)
    assert isinstance(v, Verdict) and not v
    assert str(v).startswith("not yet: set `answer`")


@pytest.mark.parametrize("check", ALL_4_5, ids=ids)
def test_nonsense_is_not_ok_and_does_not_raise(check):
    assert not check("banana")
    assert not check([1, 2])
    assert not check(float("nan"))


@pytest.mark.parametrize("check", ALL_6, ids=ids)
def test_lecture6_nonsense_is_not_ok(check):
    assert not check("banana", RESULT)
    assert not check([1, 2], RESULT)


# ------------------------------------------------------------------ lecture 4

def test_lecture4_exercise1_onebit_bytes():
    # AlexNet (61,100,840 parameters, dpsim's preset) on 16 GPUs: 2 x 15/16 x P x (1/8 + 4/256)
    params = 61_100_840
    mb = 2 * 15 / 16 * params * (1 / 8 + 4 / 256) / 1e6
    assert lecture4.exercise1(mb)
    assert lecture4.exercise1(round(mb, 1))
    fp32 = lecture4.exercise1(2 * 15 / 16 * params * 4 / 1e6)
    assert not fp32 and "plain FP32" in fp32.message
    once = lecture4.exercise1(params * (1 / 8 + 4 / 256) / 1e6)
    assert not once and "twice" in once.message
    assert not lecture4.exercise1(2 * 15 / 16 * params / 8 / 1e6)      # no scales


def test_lecture4_exercise1_matches_the_simulator():
    import dpsim
    r = dpsim.simulate("onebit-wins-ethernet", {"training.iterations": 1, "training.warmup_iterations": 0})
    assert lecture4.exercise1(r.bytes_sent_per_gpu / 1e6)


def test_lecture4_break_even_bandwidth_closed_form():
    # The plain ring sends 2 (n-1)/n m = 1.618 MB per GPU, 1-bit 0.035 of it: 1.56 MB saved.
    # 1-bit's fixed costs (39 layers x (11 kernel launches of 5 us + 2 staged messages of
    # 25 us and their links' latencies)) exceed the plain ring's by about 3.5 ms:
    # B* = 1.56 MB / 3.5 ms = 0.45 GB/s. With 5 us per message, 39 x 2 x 20 us = 1.56 ms less:
    # B* = 1.56 MB / 1.94 ms = 0.80 GB/s.
    assert lecture4.break_even_bandwidth({}) == pytest.approx(0.45, rel=0.1)
    assert lecture4.break_even_bandwidth() == pytest.approx(0.80, rel=0.1)


def test_lecture4_exercise2_break_even_bandwidth():
    assert lecture4.exercise2(0.8)
    assert lecture4.exercise2(0.78)
    assert not lecture4.exercise2(0.6)
    assert not lecture4.exercise2(1.0)
    assert not lecture4.exercise2(15.75)                 # PCIe 3: where 1-bit lost
    lecture = lecture4.exercise2(0.44)                   # the lecture's case, 25 us per message
    assert not lecture and "25 us" in lecture.message
    bits = lecture4.exercise2(6.4)                       # 0.8 GB/s in Gbit/s
    assert not bits and "factor of 8" in bits.message


def test_lecture4_exercise3_error_feedback():
    # g = (0.9, 0.1): one chunk, scale 0.5, sends (0.5, 0.5) without error feedback: 5.0 in 10
    # steps. With it the residual alternates (0.4, -0.4), (0.5, 0.5): after an even number of
    # steps 0.5 of the first value is still waiting, so 9 - 0.5 = 8.5 has arrived.
    assert lecture4.exercise3(8.5)
    without = lecture4.exercise3(5.0)
    assert not without and "WITHOUT" in without.message
    exact = lecture4.exercise3(9.0)
    assert not exact and "residual" in exact.message
    assert not lecture4.exercise3(0.5)


def test_lecture4_quantiser_is_sign_times_chunk_mean():
    import numpy as np
    v = np.array([3.0, -1.0] + [0.0] * 254 + [2.0])      # two chunks: 256 values, then 1
    q = lecture4.quantise(v)
    assert q[0] == pytest.approx(4 / 256) and q[1] == pytest.approx(-4 / 256)
    assert q[2] == pytest.approx(4 / 256)                # zero counts as non-negative
    assert q[256] == 2.0


# ------------------------------------------------------------------ lecture 5

def _synthetic_iteration_s(name, overrides):
    import dpsim
    return dpsim.simulate(name, {**overrides, "data.source": "synthetic"}).iteration_time_s


def test_lecture5_exercise1_knee():
    # DataParallel: one process loads 4 x 32 = 128 samples x 5 ms = 0.64 s per batch per worker;
    # the GPUs need t per iteration (synthetic data): W* = ceil(0.64 / t).
    t = _synthetic_iteration_s("pytorch-dataparallel-4gpu", {"training.batch_per_gpu": 32})
    ratio = 128 * 5e-3 / t
    assert abs(ratio - round(ratio)) > 0.1, "too close to a whole number for the closed form to be exact"
    knee = math.ceil(ratio)
    assert lecture5.exercise1(knee)
    assert lecture5.exercise1(float(knee))
    assert not lecture5.exercise1(knee - 1)
    too_many = lecture5.exercise1(knee + 2)
    assert not too_many and "fewer" in too_many.message
    per_gpu = math.ceil(32 * 5e-3 / t)                  # forgot that one process loads for 4 GPUs
    if per_gpu != knee:
        v = lecture5.exercise1(per_gpu)
        assert not v and "one process" in v.message


def test_lecture5_exercise2_cores():
    # 4 cores, one for the training process: 3 decoding at 5 ms per sample: 600 samples/s,
    # below what the GPUs could take on synthetic data.
    import dpsim
    fed = dpsim.simulate("pytorch-dataparallel-4gpu", {"cluster.cpu_cores": 4, "data.source": "synthetic"})
    assert fed.throughput_samples_per_s > 660
    assert lecture5.exercise2(600)
    assert lecture5.exercise2(611)                       # a finite run's boundary effect
    looks_fed = lecture5.exercise2(fed.throughput_samples_per_s)
    assert not looks_fed and "prefetched" in looks_fed.message
    all_cores = lecture5.exercise2(800)
    assert not all_cores and "training process" in all_cores.message


def test_lecture5_exercise3_tf_decode():
    # TensorFlow, synthetic data: 76.6 ms per iteration; 10 cores - 4 training processes = 6
    # decode for 4 x 128 samples: 6 x 76.6 / 512 = 0.898 ms per sample.
    assert lecture5.exercise3(0.9)
    assert not lecture5.exercise3(1.18)                  # the figure fitted to 4,900 samples/s
    assert not lecture5.exercise3(1.5)


def test_lecture5_closed_form_matches_the_simulator():
    import dpsim
    d = lecture5.break_even_decode_ms()
    fed = dpsim.simulate(lecture5.EX3_SCENARIO, {**lecture5.EX3_OVERRIDES, "data.decode_ms_per_sample": 0.95 * d})
    starved = dpsim.simulate(lecture5.EX3_SCENARIO, {**lecture5.EX3_OVERRIDES, "data.decode_ms_per_sample": 1.1 * d})
    copy_s = fed.breakdown_s["data_wait"]                # host-to-GPU copy only
    assert copy_s < 0.005 * fed.iteration_time_s
    assert starved.breakdown_s["data_wait"] > 10 * copy_s


# ------------------------------------------------------------------ lecture 6

def test_lecture6_exercise1_error_percent():
    expected = 100 * (0.0075 - 0.0083) / 0.0083          # -9.64%
    assert lecture6.exercise1(expected, RESULT)
    assert lecture6.exercise1(-9.6, RESULT)
    sign = lecture6.exercise1(9.64, RESULT)
    assert not sign and "sign" in sign.message
    by_pred = lecture6.exercise1(100 * (0.0075 - 0.0083) / 0.0075, RESULT)
    assert not by_pred and "measurement" in by_pred.message
    assert not lecture6.exercise1(-5, RESULT)


def test_lecture6_exercise2_speedup():
    assert lecture6.exercise2(15_422 / 9_846, RESULT)
    predicted = lecture6.exercise2(17_067 / 10_000, RESULT)
    assert not predicted and "predicted" in predicted.message
    eff = lecture6.exercise2(15_422 / 9_846 / 2, RESULT)
    assert not eff and "efficiency" in eff.message


def test_lecture6_exercise3_phase():
    # predicted compression 32.4 ms, measured 12.6 ms: the largest gap
    assert lecture6.exercise3("compression", RESULT)
    assert lecture6.exercise3("Compression ", RESULT)
    assert not lecture6.exercise3("exposed_comm", RESULT)
    assert not lecture6.exercise3("network", RESULT)


def test_lecture6_reads_the_json_file_and_uses_the_students_numbers(tmp_path):
    path = tmp_path / "compare.json"
    path.write_text(json.dumps(RESULT))
    assert lecture6.exercise2(15_422 / 9_846, str(path))
    other = json.loads(json.dumps(RESULT))
    other["rows"][1]["measured_iteration_s"] = 0.0060   # a different measurement, a different answer
    assert lecture6.exercise1(100 * (0.0075 - 0.0060) / 0.0060, other)
    assert not lecture6.exercise1(100 * (0.0075 - 0.0083) / 0.0083, other)


def test_lecture6_missing_row_says_which_to_run():
    only_one = {"rows": RESULT["rows"][:1]}
    v = lecture6.exercise3("compute", only_one)
    assert not v and "--ranks 1,2" in v.message
