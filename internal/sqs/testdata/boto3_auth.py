"""Drives sluice's SQS endpoint with boto3 under authentication (SigV4).

Usage: python3 boto3_auth.py ENDPOINT QUEUE_NAME
The users file the test writes: AKIDALICE/alice-secret may do everything,
AKIDBOB/bob-secret nothing. Exits non-zero on the first mismatch.
"""
import sys

import boto3
import botocore.config
import botocore.exceptions

endpoint, name = sys.argv[1], sys.argv[2]


def client(key, secret):
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=botocore.config.Config(retries={"max_attempts": 1}))


owner = client("AKIDALICE", "alice-secret")
bob = client("AKIDBOB", "bob-secret")
print("protocol", owner.meta.service_model.protocol)
url = owner.create_queue(QueueName=name)["QueueUrl"]
owner.send_message(QueueUrl=url, MessageBody="signed")
got = owner.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
assert [m["Body"] for m in got] == ["signed"], got
owner.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])


def refused(c):
    try:
        c.send_message(QueueUrl=url, MessageBody="refused")
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise SystemExit("a refused send succeeded")


for c, want in [(client("AKIDALICE", "wrong-secret"), "SignatureDoesNotMatch"),
                (client("AKIDNOBODY", "x"), "InvalidClientTokenId"),
                (bob, "AccessDenied")]:
    got = refused(c)
    assert got == want, (got, want)
    print("refused:", got)

owner.add_permission(QueueUrl=url, Label="bob-sends", AWSAccountIds=["bob"], Actions=["SendMessage"])
bob.send_message(QueueUrl=url, MessageBody="granted")
owner.remove_permission(QueueUrl=url, Label="bob-sends")
assert refused(bob) == "AccessDenied"
attrs = owner.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
assert attrs["ApproximateNumberOfMessages"] == "1", attrs
assert owner.list_queues(QueueNamePrefix=name)["QueueUrls"] == [url]
assert "QueueUrls" not in bob.list_queues(QueueNamePrefix=name)
owner.delete_queue(QueueUrl=url)
print("ok")
