from __future__ import annotations

import pytest

from slarouter_core.service.zoo import ZooError, ZooModel, load_zoo

GOOD = """
[[models]]
name = "big"
base_url = "http://127.0.0.1:9002/v1/"
model = "llama-70b"
api_key_env = "BIG_KEY"
price_per_1k_input = 1.0
price_per_1k_output = 2.0

[[models]]
name = "tiny"
base_url = "http://127.0.0.1:9001/v1"
model = "llama-1b"
price_per_request = 0.001
"""


def write(tmp_path, text):
    p = tmp_path / "zoo.toml"
    p.write_text(text)
    return p


def test_valid_zoo_is_sorted_cheapest_first_and_normalised(tmp_path):
    zoo = load_zoo(write(tmp_path, GOOD))
    assert zoo.names == ("tiny", "big")
    big = zoo.models[1]
    assert big.base_url == "http://127.0.0.1:9002/v1"
    assert big.chat_url == "http://127.0.0.1:9002/v1/chat/completions"
    assert big.price(1000, 500) == pytest.approx(1.0 + 1.0)
    assert zoo.models[0].price(10_000, 10_000) == pytest.approx(0.001)


@pytest.mark.parametrize("text, needle", [
    ("", "no [[models]]"),
    ("[[models]]\nname='a'\nbase_url='http://h/v1'\nmodel='m'\nprice_per_request=1\n", "at least two models"),
    (GOOD.replace('name = "tiny"', 'name = "big"'), "unique"),
    (GOOD.replace("price_per_request = 0.001", ""), "give a price"),
    (GOOD.replace("price_per_request = 0.001", "price_per_request = -1"), "price_per_request must be"),
    (GOOD.replace("http://127.0.0.1:9001/v1", "ftp://x"), "base_url must be an http(s) URL"),
    (GOOD.replace('model = "llama-1b"', 'modle = "llama-1b"'), "unknown key(s) modle"),
    (GOOD.replace('model = "llama-1b"', ''), "missing model"),
    (GOOD + "\n[router]\nalpha = 0.8\n", "unknown top-level key"),
    ("[[models]\nname=", "not valid TOML"),
])
def test_invalid_zoos_say_what_is_wrong(tmp_path, text, needle):
    with pytest.raises(ZooError) as e:
        load_zoo(write(tmp_path, text))
    assert needle in str(e.value)


def test_every_problem_is_listed_at_once(tmp_path):
    bad = GOOD.replace("price_per_request = 0.001", "").replace("ftp", "").replace(
        'base_url = "http://127.0.0.1:9002/v1/"', 'base_url = "nope"')
    with pytest.raises(ZooError) as e:
        load_zoo(write(tmp_path, bad))
    assert len(e.value.problems) == 2


def test_a_pasted_key_is_refused_and_never_echoed(tmp_path):
    secret = "sk-THIS-IS-A-SECRET-1234"
    with pytest.raises(ZooError) as e:
        load_zoo(write(tmp_path, GOOD.replace('"BIG_KEY"', f'"{secret}"')))
    assert "NAME of an environment variable" in str(e.value)
    assert secret not in str(e.value)


def test_missing_file_and_missing_key_variable(tmp_path, monkeypatch):
    with pytest.raises(ZooError, match="cannot read"):
        load_zoo(tmp_path / "absent.toml")
    zoo = load_zoo(write(tmp_path, GOOD))
    monkeypatch.delenv("BIG_KEY", raising=False)
    with pytest.raises(ZooError, match="BIG_KEY is not set"):
        zoo.check_environment()
    monkeypatch.setenv("BIG_KEY", "s3cr3t-value")
    zoo.check_environment()
    big = zoo.models[1]
    assert big.auth_headers() == {"Authorization": "Bearer s3cr3t-value"}  # read at call time
    assert "s3cr3t-value" not in repr(big) and "s3cr3t-value" not in str(big.public())
    assert big.public()["api_key_set"] is True


def test_model_fields_are_validated_on_construction():
    with pytest.raises(ValueError, match="timeout_s"):
        ZooModel("a", "http://h/v1", "m", price_per_request=0.0, timeout_s=0)
    with pytest.raises(ValueError, match="name"):
        ZooModel(" ", "http://h/v1", "m")


def test_stated_accuracies_come_in_routing_order_for_every_model_or_none(tmp_path):
    stated = GOOD.replace('price_per_1k_output = 2.0', 'price_per_1k_output = 2.0\naccuracy = 0.8')
    with pytest.raises(ZooError, match="accuracy is given for big only"):
        load_zoo(write(tmp_path, stated))
    both = stated.replace('price_per_request = 0.001', 'price_per_request = 0.001\naccuracy = 0.4')
    zoo = load_zoo(write(tmp_path, both))
    assert zoo.names == ("tiny", "big") and zoo.stated_levels == (0.4, 0.8)
    assert load_zoo(write(tmp_path, GOOD)).stated_levels == ()
    with pytest.raises(ZooError, match="accuracy must be a finite number >= 0 and <= 1"):
        load_zoo(write(tmp_path, both.replace("accuracy = 0.4", "accuracy = 40")))
