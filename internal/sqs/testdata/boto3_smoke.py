"""Drives sluice's SQS endpoint with boto3: create, send, receive, delete.

Usage: python3 boto3_smoke.py ENDPOINT QUEUE_NAME
Prints the protocol botocore used (query for Debian's boto3 1.26, json for
current releases) and exits non-zero on the first mismatch.
"""
import sys

import boto3

endpoint, name = sys.argv[1], sys.argv[2]
sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                   aws_access_key_id="dummy", aws_secret_access_key="dummy")
print("protocol", sqs.meta.service_model.protocol)

url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
assert url.endswith("/000000000000/" + name), url
sent = sqs.send_message(QueueUrl=url, MessageBody="hello from boto3",
                        MessageAttributes={"color": {"DataType": "String", "StringValue": "blue"},
                                           "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}})
batch = sqs.send_message_batch(QueueUrl=url, Entries=[
    {"Id": "ok", "MessageBody": "second"},
    {"Id": "bad", "MessageBody": "third", "DelaySeconds": 901},
])
assert [e["Id"] for e in batch["Successful"]] == ["ok"], batch
assert [e["Code"] for e in batch["Failed"]] == ["InvalidParameterValue"], batch

got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                          AttributeNames=["All"], MessageAttributeNames=["All"])["Messages"]
bodies = sorted(m["Body"] for m in got)
assert bodies == ["hello from boto3", "second"], bodies
first = [m for m in got if m["MessageId"] == sent["MessageId"]][0]
assert first["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"], first
assert first["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\x01", first
assert first["Attributes"]["ApproximateReceiveCount"] == "1", first
for m in got:
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
assert attrs["VisibilityTimeout"] == "60" and attrs["ApproximateNumberOfMessages"] == "0", attrs
try:
    sqs.get_queue_url(QueueName="does-not-exist")
    raise SystemExit("GetQueueUrl of a missing queue succeeded")
except sqs.exceptions.QueueDoesNotExist as e:
    print("missing queue:", e.response["Error"]["Code"])
sqs.delete_queue(QueueUrl=url)
print("ok")
