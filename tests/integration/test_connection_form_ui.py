"""The provider's S3 connection type in Airflow's own *Add Connection* form, in a real headless browser.

A user picks *S3-compatible object storage (Kafka Offsets)*, sees the fields with their labels and help
text, types the stack's SeaweedFS endpoint and key, and saves. What Airflow stored is then read back the
way a worker reads it (``airflow connections get`` on the deployment) and used by the package's own hook
to sign a request the S3 server accepts.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

import devstack
from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook
from airflow_kafka_offsets.object_storage.access import signing_credentials
from airflow_kafka_offsets.object_storage.connection import CONN_TYPE, FIELDS, HOOK_NAME
from airflow_kafka_offsets.object_storage.signing import S3Request, send

from .test_manual_ops_ui import SCREENSHOTS, login, page_text, pick, wait_until

pytestmark = pytest.mark.integration


def buttons(root: WebDriver | WebElement, text: str) -> list[WebElement]:
    """The buttons labelled ``text``; none while the page re-renders under the search."""
    try:
        return [b for b in root.find_elements(By.TAG_NAME, "button") if b.text.strip() == text]
    except StaleElementReferenceException:
        return []


def open_add_connection(driver: WebDriver, airflow: dict) -> WebElement:
    driver.get(f"{airflow['url']}/connections")
    try:
        add = wait_until(lambda: buttons(driver, "Add Connection"), "", 90)
    except AssertionError:
        raise AssertionError(f"no Add Connection button; the page shows: {page_text(driver)!r}") from None
    add[0].click()
    return wait_until(
        lambda: next(
            (d for d in driver.find_elements(By.CSS_SELECTOR, "[role=dialog]") if "Add Connection" in d.text), None
        ),
        "the Add Connection form",
    )


def field_named(form: WebElement, name: str) -> WebElement:
    return form.find_element(By.CSS_SELECTOR, f"[name={name}]")


def field_group(element: WebElement) -> WebElement:
    """The form row of an input: its label and help text live there."""
    return element.find_element(By.XPATH, "./ancestor::*[@role='group'][1]")


def stored_connection(airflow: dict, conn_id: str) -> dict:
    """The connection as a worker of the deployment reads it (the secret decrypted)."""
    env = devstack.airflow.command_env(airflow, {})
    command = [devstack.airflow.airflow_bin(), "connections", "get", conn_id, "-o", "json"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    (conn,) = json.loads(out.stdout)
    return conn


def test_the_s3_connection_form_shows_its_fields_and_saves_what_the_hook_uses(
    airflow_ui, browser, stack, monkeypatch
) -> None:
    creds = stack.s3_credentials()
    conn_id = f"lake_{uuid.uuid4().hex[:8]}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(browser, airflow_ui)
    form = open_add_connection(browser, airflow_ui)

    field_named(form, "connection_id").send_keys(conn_id)
    pick(browser, form.find_element(By.CSS_SELECTOR, "input[role=combobox]"), HOOK_NAME)
    login_box = wait_until(lambda: form.find_elements(By.CSS_SELECTOR, "[name=login]"), "the standard fields")[0]
    assert field_group(login_box).find_element(By.TAG_NAME, "label").text == "Access key ID"
    secret_box = field_named(form, "password")
    assert field_group(secret_box).find_element(By.TAG_NAME, "label").text == "Secret access key"
    assert secret_box.get_attribute("type") == "password"
    assert form.find_elements(By.CSS_SELECTOR, "[name=host]") == []  # hidden: S3 has an endpoint URL instead
    login_box.send_keys(creds.access_key)
    secret_box.send_keys(creds.secret_key)

    buttons(form, "Extra Fields")[0].click()
    for key, field in FIELDS.items():
        box = wait_until(lambda key=key: form.find_elements(By.CSS_SELECTOR, f"[name=element_{key}]"), key)[0]
        row = field_group(box)
        shown = wait_until(lambda row=row: row.is_displayed() and row.text, f"{key} shown", 30)
        assert field["label"] in shown, (key, shown)
        assert field["description"] in shown, (key, shown)
    field_named(form, "element_endpoint_url").send_keys(creds.endpoint)
    field_named(form, "element_region_name").send_keys(creds.region)
    style = field_group(field_named(form, "element_addressing_style")).find_element(
        By.CSS_SELECTOR, "input[role=combobox]"
    )
    style.send_keys(Keys.CONTROL, "a")
    pick(browser, style, "path")
    assert field_named(form, "element_aws_session_token").get_attribute("type") == "password"
    browser.save_screenshot(str(SCREENSHOTS / "s3_connection_form.png"))

    (save,) = buttons(form, "Save")
    assert save.is_enabled(), page_text(browser)
    save.click()
    wait_until(lambda: conn_id in browser.find_element(By.TAG_NAME, "body").text, "the new connection in the list", 60)

    conn = stored_connection(airflow_ui, conn_id)
    devstack.airflow.api(airflow_ui, f"connections/{conn_id}", method="DELETE")
    assert (conn["conn_type"], conn["login"], conn["password"]) == (CONN_TYPE, creds.access_key, creds.secret_key)
    extra = conn["extra_dejson"]
    assert {k: v for k, v in extra.items() if v} == {
        "endpoint_url": creds.endpoint,
        "region_name": creds.region,
        "addressing_style": "path",
    }

    # What a worker with that connection does: the package's hook turns it into a key that signs a
    # request the S3 server accepts (a listing of the stack's bucket).
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({k: conn[k] for k in ("conn_type", "login", "password")} | {"extra": extra}),
    )
    access = ObjectStorageHook(conn_id).get_conn()
    assert (access.endpoint_url, access.region, access.path_style) == (creds.endpoint, creds.region, True)
    listing = send(signing_credentials(access, f"s3://{stack.s3_bucket}"), S3Request("GET", f"/{stack.s3_bucket}"))
    assert listing.status == 200, listing.body[:300]
