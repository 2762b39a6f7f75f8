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

sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0", "MaximumMessageSize": "2048"})
assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"] == {"MaximumMessageSize": "2048"}
sqs.tag_queue(QueueUrl=url, Tags={"team": "core", "env": "test"})
sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core"}
sqs.add_permission(QueueUrl=url, Label="p", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
sqs.remove_permission(QueueUrl=url, Label="p")

sqs.send_message(QueueUrl=url, MessageBody="again")
m = sqs.receive_message(QueueUrl=url)["Messages"][0]
sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
m2 = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
assert m2["Attributes"]["ApproximateReceiveCount"] == "2", m2
res = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
    {"Id": "a", "ReceiptHandle": m2["ReceiptHandle"], "VisibilityTimeout": 30},
    {"Id": "b", "ReceiptHandle": "garbage", "VisibilityTimeout": 30}])
assert [e["Id"] for e in res["Successful"]] == ["a"] and res["Failed"][0]["Code"] == "ReceiptHandleIsInvalid", res
res = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": m2["ReceiptHandle"]}])
assert [e["Id"] for e in res["Successful"]] == ["a"], res
sqs.send_message(QueueUrl=url, MessageBody="purged")
sqs.purge_queue(QueueUrl=url)

dlq = sqs.create_queue(QueueName=name + "-dlq")["QueueUrl"]
dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
sqs.set_queue_attributes(QueueUrl=url, Attributes={
    "RedrivePolicy": '{"deadLetterTargetArn":"%s","maxReceiveCount":"5"}' % dlq_arn})
assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [url]
page = sqs.list_queues(QueueNamePrefix=name, MaxResults=1)
assert len(page["QueueUrls"]) == 1 and "NextToken" in page, page
page = sqs.list_queues(QueueNamePrefix=name, MaxResults=1, NextToken=page["NextToken"])
assert len(page["QueueUrls"]) == 1 and "NextToken" not in page, page
sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
sqs.delete_queue(QueueUrl=dlq)
try:
    sqs.get_queue_url(QueueName="does-not-exist")
    raise SystemExit("GetQueueUrl of a missing queue succeeded")
except sqs.exceptions.QueueDoesNotExist as e:
    print("missing queue:", e.response["Error"]["Code"])
sqs.delete_queue(QueueUrl=url)

fifo = sqs.create_queue(QueueName=name + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
a = sqs.send_message(QueueUrl=fifo, MessageBody="f1", MessageGroupId="g", MessageDeduplicationId="d1",
                     MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}})
b = sqs.send_message(QueueUrl=fifo, MessageBody="f1 again", MessageGroupId="g", MessageDeduplicationId="d1")
assert a["MessageId"] == b["MessageId"] and "SequenceNumber" in a, (a, b)
assert a["MD5OfMessageSystemAttributes"], a
got = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
assert len(got) == 1 and got[0]["Attributes"]["MessageGroupId"] == "g", got
assert got[0]["Attributes"]["AWSTraceHeader"] == "Root=1-abc", got
sqs.delete_queue(QueueUrl=fifo)
print("ok")
